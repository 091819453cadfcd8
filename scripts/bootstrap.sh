#!/usr/bin/env bash
# Build softfuse's dependencies once, into a cache, and print the path of a
# CMake initial-cache file that points a softfuse build at them.
#
#   bash scripts/bootstrap.sh [--backend openmp|cuda] [--arch HOPPER90|AMPERE80]
#                             [--offline BUNDLE_DIR] [--jobs N]
#   deps=$(bash scripts/bootstrap.sh | tail -n1) && cmake -S . -B build -C "$deps"
#
# What it builds (each step stamped with a hash of its inputs, so a second run
# neither downloads nor rebuilds anything):
#   Kokkos 3.4.01 and Kokkos Kernels 3.4.01, from Debian's trilinos 13.2.0-4
#   source package (online) or from a bundle made by scripts/pack_gpu_bundle.sh
#   (--offline), patched with scripts/patches/{kokkos,kokkos-kernels}/*.patch.
#     openmp: Kokkos OpenMP+Serial, Kokkos Kernels with the host BLAS TPL: OpenBLAS built with
#             OpenMP (Debian's libopenblas0-openmp; offline: the bundle's copy), so that its GEMM
#             runs on the same OpenMP threads as Kokkos instead of a pthread pool of its own
#             competing with them.
#     cuda:   Kokkos CUDA+OpenMP+Serial for one GPU architecture, CXX = Kokkos'
#             nvcc_wrapper, Kokkos Kernels with the cuBLAS TPL.
#   GoogleTest and Google Benchmark, only where the system has none
#   (from /usr/src/googletest and Debian's benchmark source, or the bundle).
#
# Environment:
#   SOFTFUSE_DEPS_DIR   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/softfuse)
#   SOFTFUSE_JOBS       parallel build jobs (default: nproc)
#   SOFTFUSE_BLAS_LIBRARIES  the BLAS library to link instead of the OpenMP OpenBLAS (openmp backend)
#   SOFTFUSE_KK_ETI     none (default) | minimal: pre-instantiate Kokkos Kernels for
#                       float+double, LayoutRight, int ordinal, size_t offset on the
#                       backend's device. The TPL (OpenBLAS/cuBLAS) gemm path needs
#                       no ETI, so the default builds none.
#   SOFTFUSE_BUILD_TEST_DEPS=1  build GoogleTest/Benchmark even if the system has them
#   SOFTFUSE_DEBIAN_MIRROR      default http://deb.debian.org/debian
#   CMAKE               cmake executable (default: cmake on PATH)
#   CXX                 host C++ compiler (default: c++, else g++)
#   CUDA_HOME / CUDA_ROOT  CUDA toolkit root (default: from nvcc on PATH, else /usr/local/cuda)
#
# Layout of the cache:
#   downloads/               source packages fetched with apt-get source
#   src/                     pristine and patched source trees
#   host/{googletest,benchmark}   test libraries (only when built here)
#   <config>/{kokkos,kokkos-kernels}   install prefixes; <config> = openmp | cuda-hopper90 | cuda-ampere80
#                            (openmp: kokkos-kernels-<blas>, one per BLAS: openblas-openmp, or blas-<hash>
#                            for SOFTFUSE_BLAS_LIBRARIES)
#   <config>/build/          build trees and logs
#   openblas-openmp/lib      OpenBLAS (OpenMP) and its run-time libraries from the bundle (offline)
#   <config>/deps.cmake      the file whose path is printed last on stdout
#
# Progress goes to stderr; stdout carries only the deps.cmake path (last line).
set -Eeuo pipefail

readonly BOOTSTRAP_VERSION=1
readonly KOKKOS_VERSION=3.4.01 OPENBLAS_VERSION=0.3.21
readonly TRILINOS_PKG=trilinos TRILINOS_DEB_VERSION=13.2.0-4 TRILINOS_UPSTREAM=13.2.0
readonly BENCHMARK_PKG=benchmark BENCHMARK_DEB_VERSION=1.7.1-1 BENCHMARK_UPSTREAM=1.7.1

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PATCH_ROOT=$SCRIPT_DIR/patches
START_SECONDS=$SECONDS

# ---------------------------------------------------------------- messages --
log()  { printf '[bootstrap %4ss] %s\n' "$((SECONDS - START_SECONDS))" "$*" >&2; }
warn() { printf '[bootstrap] WARNING: %s\n' "$*" >&2; }
die()  { printf '\n[bootstrap] ERROR: %s\n' "$*" >&2; exit 1; }
on_err() {
  local rc=$?
  printf '\n[bootstrap] ERROR: command failed (exit %s) at line %s: %s\n' "$rc" "$1" "$2" >&2
  exit "$rc"
}
trap 'on_err "$LINENO" "$BASH_COMMAND"' ERR

STEP_NAME="" STEP_START=0
step() { STEP_NAME=$1; STEP_START=$SECONDS; log "==> $1"; }
done_step() { log "    done: $STEP_NAME (${1:+$1, }$((SECONDS - STEP_START)) s)"; }

usage() {
  sed -n '2,40p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
}

# ------------------------------------------------------------------- args --
BACKEND=openmp ARCH=HOPPER90 OFFLINE="" JOBS=${SOFTFUSE_JOBS:-} MODE=build
while [[ $# -gt 0 ]]; do
  case $1 in
    --backend)   [[ $# -ge 2 ]] || die "--backend needs a value"; BACKEND=$2; shift 2 ;;
    --backend=*) BACKEND=${1#*=}; shift ;;
    --arch)      [[ $# -ge 2 ]] || die "--arch needs a value"; ARCH=$2; shift 2 ;;
    --arch=*)    ARCH=${1#*=}; shift ;;
    --offline)   [[ $# -ge 2 ]] || die "--offline needs a bundle directory"; OFFLINE=$2; shift 2 ;;
    --offline=*) OFFLINE=${1#*=}; shift ;;
    --jobs|-j)   [[ $# -ge 2 ]] || die "--jobs needs a value"; JOBS=$2; shift 2 ;;
    --jobs=*)    JOBS=${1#*=}; shift ;;
    # Used by scripts/pack_gpu_bundle.sh: fetch + extract sources, build nothing.
    --fetch-sources) MODE=fetch; shift ;;
    -h|--help)   usage; exit 0 ;;
    *) usage; die "unknown argument: $1" ;;
  esac
done

case $BACKEND in openmp|cuda) ;; *) die "--backend must be openmp or cuda (got '$BACKEND')" ;; esac
ARCH=$(printf '%s' "$ARCH" | tr '[:lower:]' '[:upper:]')
case $ARCH in
  HOPPER90) CUDA_ARCH_NUM=90 ;;
  AMPERE80) CUDA_ARCH_NUM=80 ;;
  *) die "--arch must be HOPPER90 or AMPERE80 (got '$ARCH')" ;;
esac
KK_ETI=${SOFTFUSE_KK_ETI:-none}
case $KK_ETI in none|minimal) ;; *) die "SOFTFUSE_KK_ETI must be none or minimal (got '$KK_ETI')" ;; esac
[[ -n $JOBS ]] || JOBS=$(nproc 2>/dev/null || echo 2)
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || die "--jobs must be a positive integer (got '$JOBS')"

if [[ $BACKEND == openmp ]]; then CONFIG=openmp; else CONFIG=cuda-$(printf '%s' "$ARCH" | tr '[:upper:]' '[:lower:]'); fi

ROOT=${SOFTFUSE_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/softfuse}
mkdir -p "$ROOT" || die "cannot create cache directory $ROOT"
ROOT=$(cd "$ROOT" && pwd)
if [[ -n $OFFLINE ]]; then
  [[ -d $OFFLINE ]] || die "offline bundle directory not found: $OFFLINE"
  OFFLINE=$(cd "$OFFLINE" && pwd)
fi

# One bootstrap at a time per cache (CI and a developer shell may race).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$ROOT/.lock"
  flock -w 3600 9 || die "could not lock $ROOT/.lock"
fi

# ------------------------------------------------------------------ helpers --
have() { command -v "$1" >/dev/null 2>&1; }
hash16() { sha256sum | cut -c1-16; }
# Hash of all patch files of one package, in application order. Only the diff
# part counts: editing a patch's explanatory header does not force a rebuild.
patch_files() { find "$PATCH_ROOT/$1" -maxdepth 1 -name '*.patch' -type f 2>/dev/null | LC_ALL=C sort; }
patches_hash() {
  local f
  { echo "patches:$1"
    patch_files "$1" | while read -r f; do basename "$f"; sed -n '/^diff \|^--- /,$p' "$f"; done
  } | hash16
}
stamp_ok() { [[ -f $1 ]] && [[ $(cat "$1") == "$2" ]]; }

# run_logged LOGFILE CMD...: run quietly into LOGFILE, show its tail on failure.
run_logged() {
  local logf=$1; shift
  if [[ ${SOFTFUSE_VERBOSE:-0} == 1 ]]; then
    "$@" 2>&1 | tee "$logf" >&2 && return 0
  elif "$@" >"$logf" 2>&1; then
    return 0
  fi
  printf '\n----- last 40 lines of %s -----\n' "$logf" >&2
  tail -n 40 "$logf" >&2 || true
  die "step '$STEP_NAME' failed: $* (full log: $logf)"
}

# Apply one -p1 unified diff inside DIR: patch(1) if present, else a strict
# python3 applier (the GPU image may lack patch(1)); no fuzz either way.
apply_patch() {
  local dir=$1 pf=$2
  if have patch && [[ ${SOFTFUSE_PATCH_TOOL:-} != python3 ]]; then
    patch -d "$dir" -p1 --forward --batch --fuzz=0 --no-backup-if-mismatch -s <"$pf" >&2 \
      || die "patch $(basename "$pf") does not apply to $dir"
  elif have python3; then
    python3 - "$dir" "$pf" <<'PY' || die "patch $(basename "$2") does not apply to $1"
import os, re, sys
root, pf = sys.argv[1], sys.argv[2]
lines = open(pf, encoding="utf-8").read().split("\n")
files, i = [], 0
while i < len(lines):
    if lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
        path = lines[i + 1][4:].split("\t")[0]
        path = path.split("/", 1)[1] if "/" in path else path
        hunks, i = [], i + 2
        while i < len(lines) and lines[i].startswith("@@"):
            m = re.match(r"@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@", lines[i])
            old, new, i = [], [], i + 1
            while i < len(lines) and lines[i][:1] in (" ", "+", "-", "\\") and not lines[i].startswith(("--- ", "+++ ")):
                t, body = lines[i][:1], lines[i][1:]
                if t in (" ", "-"): old.append(body)
                if t in (" ", "+"): new.append(body)
                i += 1
            hunks.append((int(m.group(1)) - 1, old, new))
        files.append((path, hunks))
    else:
        i += 1
if not files:
    sys.exit("no file diffs found")
for path, hunks in files:
    full = os.path.join(root, path)
    text = open(full, encoding="utf-8").read().split("\n")
    shift = 0
    for start, old, new in hunks:
        want = start + shift
        cands = [p for p in range(len(text) - len(old) + 1) if text[p:p + len(old)] == old]
        if not cands:
            sys.exit("hunk at line %d of %s does not match" % (start + 1, path))
        p = min(cands, key=lambda c: abs(c - want))
        text[p:p + len(old)] = new
        shift = p - start + len(new) - len(old)
    open(full, "w", encoding="utf-8").write("\n".join(text))
PY
  else
    die "neither patch(1) nor python3 is available to apply $(basename "$pf")"
  fi
}

cmake_gen_args() {
  if have ninja; then echo "-GNinja"; else echo "-GUnix Makefiles"; fi
}

# ----------------------------------------------------------------- toolchain --
CMAKE_BIN=${CMAKE:-cmake}
have "$CMAKE_BIN" || die "cmake not found (install cmake >= 3.16 or set CMAKE=...)"
CMAKE_BIN=$(command -v "$CMAKE_BIN")
CMAKE_VERSION_STR=$("$CMAKE_BIN" --version | sed -n '1s/^cmake version //p')
case $CMAKE_VERSION_STR in
  3.1[6-9]*|3.[2-9][0-9]*|[4-9].*) ;;
  *) die "cmake >= 3.16 required, found '$CMAKE_VERSION_STR' ($CMAKE_BIN)" ;;
esac
GEN=$(cmake_gen_args)

if [[ -n ${CXX:-} ]]; then HOST_CXX=$(command -v "$CXX" || true); else HOST_CXX=$(command -v c++ || command -v g++ || true); fi
[[ -n $HOST_CXX ]] || die "no host C++ compiler found (install g++ or set CXX)"
HOST_CXX_ID=$("$HOST_CXX" --version 2>/dev/null | head -n1)

CUDA_ROOT_DIR="" NVCC_ID=""
if [[ $BACKEND == cuda && $MODE == build ]]; then
  if [[ -n ${CUDA_HOME:-} && -x ${CUDA_HOME}/bin/nvcc ]]; then CUDA_ROOT_DIR=$CUDA_HOME
  elif [[ -n ${CUDA_ROOT:-} && -x ${CUDA_ROOT}/bin/nvcc ]]; then CUDA_ROOT_DIR=$CUDA_ROOT
  elif have nvcc; then CUDA_ROOT_DIR=$(cd "$(dirname "$(readlink -f "$(command -v nvcc)")")/.." && pwd)
  elif [[ -x /usr/local/cuda/bin/nvcc ]]; then CUDA_ROOT_DIR=/usr/local/cuda
  else die "backend cuda: nvcc not found (put it on PATH or set CUDA_HOME)"; fi
  # nvcc_wrapper runs 'nvcc' from PATH.
  case ":$PATH:" in *":$CUDA_ROOT_DIR/bin:"*) ;; *) export PATH="$CUDA_ROOT_DIR/bin:$PATH" ;; esac
  NVCC_ID=$("$CUDA_ROOT_DIR/bin/nvcc" --version | tail -n1)
fi

log "softfuse deps bootstrap: backend=$BACKEND${CUDA_ROOT_DIR:+ arch=$ARCH} config=$CONFIG source=$([[ -n $OFFLINE ]] && echo "bundle $OFFLINE" || echo "debian trilinos $TRILINOS_DEB_VERSION") jobs=$JOBS"
log "cache: $ROOT   cmake: $CMAKE_VERSION_STR   c++: $HOST_CXX_ID${NVCC_ID:+   nvcc: $NVCC_ID}"

# ----------------------------------------------------------- host packages --
is_installed() { dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null | grep -q '^ii'; }

ensure_host_packages() {
  [[ -z $OFFLINE ]] || return 0
  if ! have dpkg-query || ! have apt-get; then
    warn "not a Debian-like system: skipping host package checks"
    return 0
  fi
  local want=() missing=() p
  [[ $MODE == fetch ]] && want+=(googletest)
  if [[ $MODE == build ]]; then
    [[ $BACKEND == openmp ]] && want+=(libopenblas-openmp-dev)
    want+=(googletest libgtest-dev libbenchmark-dev)
  fi
  for p in "${want[@]}"; do is_installed "$p" || missing+=("$p"); done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  step "install host packages: ${missing[*]}"
  [[ $(id -u) -eq 0 ]] || die "missing packages ${missing[*]}; run: sudo apt-get install -y --no-install-recommends ${missing[*]}"
  run_logged "$ROOT/apt-install.log" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  run_logged "$ROOT/apt-install.log" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
  done_step
}

# ------------------------------------------------------------------ sources --
DL=$ROOT/downloads
APT_DIR=$ROOT/apt
MIRROR=${SOFTFUSE_DEBIAN_MIRROR:-http://deb.debian.org/debian}

apt_private() {
  mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial"
  printf 'deb-src %s bookworm main\n' "$MIRROR" >"$APT_DIR/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$APT_DIR/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
              -o "Dir::State::Lists=$APT_DIR/lists" -o "Dir::Cache=$APT_DIR/cache" -q)
  [[ $(id -u) -eq 0 ]] && opts+=(-o "APT::Sandbox::User=root")
  apt-get "${opts[@]}" "$@"
}

# verify_dsc_file DSC FILE: check FILE's sha256 against the .dsc's Checksums-Sha256.
verify_dsc_file() {
  local dsc=$1 f=$2 want got
  want=$(awk -v n="$(basename "$f")" '/^Checksums-Sha256:/{s=1;next} /^[^ ]/{s=0} s && $3==n {print $1}' "$dsc")
  [[ -n $want ]] || die "$(basename "$f") is not listed in $(basename "$dsc")"
  got=$(sha256sum "$f" | cut -d' ' -f1)
  [[ $want == "$got" ]] || die "checksum mismatch for $f (expected $want, got $got); delete it and rerun"
}

# fetch_source PKG DEBVER UPSTREAM: download PKG=DEBVER's source package into downloads/.
fetch_source() {
  local pkg=$1 ver=$2 up=$3
  local stamp=$DL/.${pkg}_${ver}.ok orig=$DL/${pkg}_${up}.orig.tar.gz dsc=$DL/${pkg}_${ver}.dsc
  if [[ -f $stamp && -f $orig && -f $dsc ]]; then return 0; fi
  have apt-get || die "apt-get not found: cannot fetch the $pkg source package (use --offline BUNDLE_DIR)"
  step "fetch Debian source package $pkg $ver (apt-get source, private sources list)"
  mkdir -p "$DL"
  if [[ ! -f $APT_DIR/.updated ]] || ! ls "$APT_DIR"/lists/*Sources* >/dev/null 2>&1; then
    run_logged "$APT_DIR.log" apt_private update
    touch "$APT_DIR/.updated"
  fi
  (cd "$DL" && run_logged "$DL/apt-source-$pkg.log" apt_private source --download-only "$pkg=$ver")
  [[ -f $orig && -f $dsc ]] || die "apt-get source did not produce $orig"
  verify_dsc_file "$dsc" "$orig"
  touch "$stamp"
  done_step "$(du -h "$orig" | cut -f1)"
}

# Pristine Kokkos + Kokkos Kernels trees: $PRISTINE/{kokkos,kokkos-kernels}.
prepare_pristine() {
  if [[ -z $OFFLINE ]]; then
    PRISTINE_ID=debian-trilinos-$TRILINOS_DEB_VERSION
    PRISTINE=$ROOT/src/pristine-$PRISTINE_ID
    # Once extracted, downloads/ is not needed again (it may be deleted).
    stamp_ok "$PRISTINE/.stamp" "$PRISTINE_ID" && return 0
    fetch_source "$TRILINOS_PKG" "$TRILINOS_DEB_VERSION" "$TRILINOS_UPSTREAM"
    step "extract packages/kokkos and packages/kokkos-kernels from ${TRILINOS_PKG}_${TRILINOS_UPSTREAM}.orig.tar.gz"
    rm -rf "$PRISTINE" "$PRISTINE.tmp"; mkdir -p "$PRISTINE.tmp"
    tar -xzf "$DL/${TRILINOS_PKG}_${TRILINOS_UPSTREAM}.orig.tar.gz" -C "$PRISTINE.tmp" \
        --wildcards --no-wildcards-match-slash --strip-components=2 \
        '*/packages/kokkos' '*/packages/kokkos-kernels' \
      || die "extracting Kokkos from the trilinos tarball failed"
  else
    local kt=$OFFLINE/kokkos-$KOKKOS_VERSION.tar.gz kkt=$OFFLINE/kokkos-kernels-$KOKKOS_VERSION.tar.gz
    [[ -f $kt && -f $kkt ]] || die "bundle $OFFLINE lacks kokkos-$KOKKOS_VERSION.tar.gz / kokkos-kernels-$KOKKOS_VERSION.tar.gz (make it with scripts/pack_gpu_bundle.sh)"
    PRISTINE_ID=bundle-$(cat "$kt" "$kkt" | hash16)
    PRISTINE=$ROOT/src/pristine-$PRISTINE_ID
    stamp_ok "$PRISTINE/.stamp" "$PRISTINE_ID" && return 0
    step "extract Kokkos sources from the bundle"
    rm -rf "$PRISTINE" "$PRISTINE.tmp"; mkdir -p "$PRISTINE.tmp"
    tar -xzf "$kt" -C "$PRISTINE.tmp" || die "extracting $kt failed"
    tar -xzf "$kkt" -C "$PRISTINE.tmp" || die "extracting $kkt failed"
  fi
  [[ -f $PRISTINE.tmp/kokkos/CMakeLists.txt && -f $PRISTINE.tmp/kokkos-kernels/CMakeLists.txt ]] \
    || die "unexpected source layout: no kokkos/ or kokkos-kernels/ CMakeLists.txt in $PRISTINE.tmp"
  grep -q "tag:  $KOKKOS_VERSION" "$PRISTINE.tmp/kokkos/master_history.txt" \
    || die "the extracted Kokkos is not version $KOKKOS_VERSION"
  echo "$PRISTINE_ID" >"$PRISTINE.tmp/.stamp"
  mv "$PRISTINE.tmp" "$PRISTINE"
  done_step "$(du -sh "$PRISTINE" | cut -f1)"
}

# patched_tree PKG -> sets TREE to src/PKG-VERSION-KEY with all PKG patches applied.
patched_tree() {
  local pkg=$1 key dir pf n=0
  key=$( { echo "$PRISTINE_ID"; patches_hash "$pkg"; } | hash16)
  dir=$ROOT/src/$pkg-$KOKKOS_VERSION-$key
  TREE=$dir
  stamp_ok "$dir/.softfuse-patched" "$key" && return 0
  step "patch $pkg $KOKKOS_VERSION"
  rm -rf "$dir" "$dir.tmp"
  cp -a "$PRISTINE/$pkg" "$dir.tmp"
  while read -r pf; do
    [[ -n $pf ]] || continue
    apply_patch "$dir.tmp" "$pf"; n=$((n + 1))
    log "    applied $(basename "$pf")"
  done < <(patch_files "$pkg")
  echo "$key" >"$dir.tmp/.softfuse-patched"
  mv "$dir.tmp" "$dir"
  done_step "$n patches"
}

# -------------------------------------------------------------- cmake build --
# cmake_build NAME SRC BUILD PREFIX KEY CMAKE_ARGS...: configure, build, install,
# unless PREFIX/.softfuse-stamp already holds KEY.
cmake_build() {
  local name=$1 src=$2 bdir=$3 prefix=$4 key=$5; shift 5
  if stamp_ok "$prefix/.softfuse-stamp" "$key"; then
    log "up to date: $name ($prefix)"
    return 0
  fi
  step "build $name"
  rm -rf "$bdir" "$prefix"; mkdir -p "$bdir"
  run_logged "$bdir/configure.log" "$CMAKE_BIN" "$GEN" -S "$src" -B "$bdir" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib "$@"
  local t0=$SECONDS
  run_logged "$bdir/build.log" "$CMAKE_BIN" --build "$bdir" --parallel "$JOBS"
  local tb=$((SECONDS - t0))
  run_logged "$bdir/install.log" "$CMAKE_BIN" --install "$bdir"
  echo "$key" >"$prefix/.softfuse-stamp"
  done_step "compile ${tb} s"
}

# ------------------------------------------------------------- test deps --
find_system_cmake_pkg() { # NAME CONFIGFILE
  local d
  for d in /usr/lib/*/cmake/"$1" /usr/lib/cmake/"$1" /usr/lib64/cmake/"$1" /usr/share/"$1"/cmake \
           /usr/local/lib/*/cmake/"$1" /usr/local/lib/cmake/"$1" /usr/local/lib64/cmake/"$1"; do
    [[ -f $d/$2 ]] && { echo "$d"; return 0; }
  done
  return 1
}

# bundle_or_system_src NAME SYSTEM_DIR BUNDLE_TARBALL -> sets SRC
test_dep_source() {
  local name=$1 sysdir=$2 tarball=$3
  if [[ -n $OFFLINE && -f $OFFLINE/$tarball ]]; then
    local key dir
    key=$(hash16 <"$OFFLINE/$tarball")
    dir=$ROOT/src/$name-$key
    if ! stamp_ok "$dir/.stamp" "$key"; then
      rm -rf "$dir" "$dir.tmp"; mkdir -p "$dir.tmp"
      tar -xzf "$OFFLINE/$tarball" -C "$dir.tmp" || die "extracting $tarball failed"
      echo "$key" >"$dir.tmp/.stamp"; mv "$dir.tmp" "$dir"
    fi
    SRC=$(dirname "$(find "$dir" -mindepth 2 -maxdepth 2 -name CMakeLists.txt | head -n1)")
    SRC_ID=bundle-$key
  elif [[ -n $sysdir && -f $sysdir/CMakeLists.txt ]]; then
    SRC=$sysdir
    SRC_ID=system-$(find "$sysdir" -type f -printf '%P %s\n' | LC_ALL=C sort | hash16)
  else
    SRC="" SRC_ID=""
  fi
}

GTEST_PREFIX="" BENCHMARK_PREFIX=""
ensure_test_deps() {
  local force=${SOFTFUSE_BUILD_TEST_DEPS:-0}
  local common=(-DCMAKE_CXX_COMPILER="$HOST_CXX" -DCMAKE_POSITION_INDEPENDENT_CODE=ON)

  if [[ $force != 1 ]] && find_system_cmake_pkg GTest GTestConfig.cmake >/dev/null; then
    log "GoogleTest: using the system's ($(find_system_cmake_pkg GTest GTestConfig.cmake))"
  else
    test_dep_source googletest /usr/src/googletest googletest-1.12.1.tar.gz
    [[ -n $SRC ]] || die "GoogleTest: not installed and no sources (online: apt-get install googletest; offline: the bundle's googletest-1.12.1.tar.gz)"
    GTEST_PREFIX=$ROOT/host/googletest
    cmake_build "GoogleTest" "$SRC" "$ROOT/host/build/googletest" "$GTEST_PREFIX" \
      "$( { echo "v$BOOTSTRAP_VERSION $SRC_ID $HOST_CXX_ID"; } | hash16)" \
      "${common[@]}" -DINSTALL_GTEST=ON -DBUILD_GMOCK=ON
  fi

  if [[ $force != 1 ]] && find_system_cmake_pkg benchmark benchmarkConfig.cmake >/dev/null; then
    log "Google Benchmark: using the system's ($(find_system_cmake_pkg benchmark benchmarkConfig.cmake))"
  else
    if [[ -z $OFFLINE ]]; then
      fetch_source "$BENCHMARK_PKG" "$BENCHMARK_DEB_VERSION" "$BENCHMARK_UPSTREAM"
      test_dep_source_from_tarball benchmark "$DL/${BENCHMARK_PKG}_${BENCHMARK_UPSTREAM}.orig.tar.gz"
    else
      test_dep_source benchmark "" "benchmark-$BENCHMARK_UPSTREAM.tar.gz"
    fi
    [[ -n $SRC ]] || die "Google Benchmark: not installed and no sources (offline: the bundle's benchmark-$BENCHMARK_UPSTREAM.tar.gz)"
    BENCHMARK_PREFIX=$ROOT/host/benchmark
    cmake_build "Google Benchmark" "$SRC" "$ROOT/host/build/benchmark" "$BENCHMARK_PREFIX" \
      "$( { echo "v$BOOTSTRAP_VERSION $SRC_ID $HOST_CXX_ID"; } | hash16)" \
      "${common[@]}" -DBENCHMARK_ENABLE_TESTING=OFF -DBENCHMARK_ENABLE_GTEST_TESTS=OFF \
      -DBENCHMARK_ENABLE_WERROR=OFF -DBENCHMARK_INSTALL_DOCS=OFF -DBENCHMARK_ENABLE_LTO=OFF
  fi
}

# Online, benchmark sources come from the downloaded Debian orig tarball.
test_dep_source_from_tarball() {
  local name=$1 tarball=$2 key dir
  key=$(hash16 <"$tarball")
  dir=$ROOT/src/$name-$key
  if ! stamp_ok "$dir/.stamp" "$key"; then
    rm -rf "$dir" "$dir.tmp"; mkdir -p "$dir.tmp"
    tar -xzf "$tarball" -C "$dir.tmp" || die "extracting $tarball failed"
    echo "$key" >"$dir.tmp/.stamp"; mv "$dir.tmp" "$dir"
  fi
  SRC=$(dirname "$(find "$dir" -mindepth 2 -maxdepth 2 -name CMakeLists.txt | head -n1)")
  SRC_ID=debian-$key
}

# ---------------------------------------------------------- fetch-only mode --
if [[ $MODE == fetch ]]; then
  [[ -z $OFFLINE ]] || die "--fetch-sources cannot be combined with --offline"
  ensure_host_packages
  prepare_pristine
  fetch_source "$BENCHMARK_PKG" "$BENCHMARK_DEB_VERSION" "$BENCHMARK_UPSTREAM"
  echo "PRISTINE=$PRISTINE"
  echo "BENCHMARK_TARBALL=$DL/${BENCHMARK_PKG}_${BENCHMARK_UPSTREAM}.orig.tar.gz"
  exit 0
fi

# ------------------------------------------------------------------- main --
ensure_host_packages
prepare_pristine
patched_tree kokkos;         KOKKOS_SRC=$TREE
patched_tree kokkos-kernels; KK_SRC=$TREE

CFG_DIR=$ROOT/$CONFIG
KOKKOS_PREFIX=$CFG_DIR/kokkos
KK_NAME=kokkos-kernels  # openmp: named for its BLAS below, so that builds against different BLAS coexist

KOKKOS_ARGS=(-DCMAKE_CXX_STANDARD=17 -DCMAKE_CXX_EXTENSIONS=OFF
             -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_TESTS=OFF -DKokkos_ENABLE_EXAMPLES=OFF)
KK_ARGS=(-DCMAKE_CXX_EXTENSIONS=OFF -DKokkos_ROOT="$KOKKOS_PREFIX"
         -DKokkosKernels_ENABLE_TESTS=OFF -DKokkosKernels_ENABLE_EXAMPLES=OFF
         -DKokkosKernels_ADD_DEFAULT_ETI=OFF)
# ETI: none by default. Every type list switched off explicitly, so that no
# default of Kokkos Kernels' own can bring instantiations back.
if [[ $KK_ETI == minimal ]]; then
  KK_ARGS+=(-DKokkosKernels_INST_FLOAT=ON -DKokkosKernels_INST_DOUBLE=ON
            -DKokkosKernels_INST_LAYOUTRIGHT=ON -DKokkosKernels_INST_LAYOUTLEFT=OFF
            -DKokkosKernels_INST_ORDINAL_INT=ON -DKokkosKernels_INST_OFFSET_SIZE_T=ON
            -DKokkosKernels_INST_OFFSET_INT=OFF)
else
  KK_ARGS+=(-DKokkosKernels_INST_FLOAT=OFF -DKokkosKernels_INST_DOUBLE=OFF
            -DKokkosKernels_INST_LAYOUTRIGHT=OFF -DKokkosKernels_INST_LAYOUTLEFT=OFF
            -DKokkosKernels_INST_ORDINAL_INT=OFF -DKokkosKernels_INST_OFFSET_SIZE_T=OFF
            -DKokkosKernels_INST_OFFSET_INT=OFF)
fi
if [[ $KK_ETI == minimal ]]; then ETI_ON=ON; else ETI_ON=OFF; fi
# The host CPU's vector ISA, as a Kokkos architecture option (Kokkos passes its -march on to
# every code that links Kokkos): without it the host row passes run on SSE2. SOFTFUSE_HOST_ARCH
# overrides (SKX, HSW, …, or none for a cache that other CPUs can use).
host_arch() {
  if [[ -n ${SOFTFUSE_HOST_ARCH:-} ]]; then echo "$SOFTFUSE_HOST_ARCH"; return; fi
  local flags; flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
  case " $flags " in
    *" avx512f "*) echo SKX ;;
    *" avx2 "*) echo HSW ;;
    *) echo none ;;
  esac
}
if [[ $BACKEND == openmp ]]; then
  KOKKOS_CXX=$HOST_CXX
  KOKKOS_ARGS+=(-DCMAKE_CXX_COMPILER="$KOKKOS_CXX" -DKokkos_ENABLE_OPENMP=ON)
  HOST_ARCH=$(host_arch)
  [[ $HOST_ARCH == none ]] || KOKKOS_ARGS+=("-DKokkos_ARCH_${HOST_ARCH}=ON")
  KK_CXX=$HOST_CXX
  BLAS_LIBS=${SOFTFUSE_BLAS_LIBRARIES:-}  # default: the OpenMP OpenBLAS (below)
  KK_ARGS+=(-DCMAKE_CXX_COMPILER="$KK_CXX"
            -DKokkosKernels_ENABLE_TPL_BLAS=ON -DKokkosKernels_ENABLE_TPL_LAPACK=ON
            # OpenBLAS/gfortran symbol convention (dgemm_); spares KK a Fortran compiler.
            "-DF77_BLAS_MANGLE=(name,NAME) name ## _"
            -DKokkosKernels_INST_MEMSPACE_HOSTSPACE="$ETI_ON"
            -DKokkosKernels_INST_EXECSPACE_OPENMP="$ETI_ON"
            -DKokkosKernels_INST_EXECSPACE_SERIAL=OFF)
  DEVICE_DESC="OpenMP+Serial, host arch $HOST_ARCH"
else
  KOKKOS_CXX=$KOKKOS_SRC/bin/nvcc_wrapper
  # OpenMP as the host backend: the GPU results are cross-checked against it in the same build.
  KOKKOS_ARGS+=(-DCMAKE_CXX_COMPILER="$KOKKOS_CXX" -DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_OPENMP=ON
                -DKokkos_ENABLE_CUDA_LAMBDA=ON "-DKokkos_ARCH_${ARCH}=ON"
                -DCUDAToolkit_ROOT="$CUDA_ROOT_DIR")
  KK_CXX=$KOKKOS_PREFIX/bin/nvcc_wrapper
  KK_ARGS+=(-DCMAKE_CXX_COMPILER="$KK_CXX" -DCUDAToolkit_ROOT="$CUDA_ROOT_DIR"
            -DKokkosKernels_ENABLE_TPL_CUBLAS=ON -DKokkosKernels_ENABLE_TPL_CUSPARSE=OFF
            -DKokkosKernels_ENABLE_TPL_BLAS=OFF -DKokkosKernels_ENABLE_TPL_LAPACK=OFF
            -DKokkosKernels_INST_EXECSPACE_CUDA="$ETI_ON"
            -DKokkosKernels_INST_MEMSPACE_CUDASPACE="$ETI_ON"
            -DKokkosKernels_INST_MEMSPACE_CUDAUVMSPACE=OFF
            -DKokkosKernels_INST_MEMSPACE_HOSTSPACE=OFF
            -DKokkosKernels_INST_EXECSPACE_SERIAL=OFF)
  DEVICE_DESC="Cuda($ARCH)+OpenMP+Serial"
fi

# The OpenMP build of OpenBLAS: Debian's multiarch folder, or the bundle's copy extracted into the cache
# (its libgfortran and libquadmath with it: the GPU machine may have none). BLAS_RUNTIME_DIR: where the
# binaries find those at run time (on LD_LIBRARY_PATH where it is not a system folder).
openblas_openmp_dir() {
  local d
  if [[ -n $OFFLINE ]]; then
    local tarball=$OFFLINE/openblas-openmp-$OPENBLAS_VERSION.tar.gz key
    [[ -f $tarball ]] || return 0
    key=$(hash16 <"$tarball")
    d=$ROOT/openblas-openmp
    if ! stamp_ok "$d/.stamp" "$key"; then
      rm -rf "$d" "$d.tmp"; mkdir -p "$d.tmp"
      tar -xzf "$tarball" -C "$d.tmp" || die "extracting $tarball failed"
      echo "$key" >"$d.tmp/.stamp"; mv "$d.tmp" "$d"
    fi
    echo "$d/lib"
    return 0
  fi
  for d in /usr/lib/*/openblas-openmp /usr/lib64/openblas-openmp; do
    [[ -e $d/libopenblas.so ]] && { echo "$d"; return 0; }
  done
}
BLAS_RUNTIME_DIR=""
if [[ $BACKEND == openmp ]]; then
  if [[ -n ${SOFTFUSE_BLAS_LIBRARIES:-} ]]; then
    KK_ARGS+=(-DBLAS_LIBRARIES="$BLAS_LIBS" -DLAPACK_LIBRARIES="$BLAS_LIBS")
    KK_NAME=kokkos-kernels-blas-$(printf '%s' "$BLAS_LIBS" | hash16 | cut -c1-8)
  else
    BLAS_DIR=$(openblas_openmp_dir)
    [[ -n $BLAS_DIR ]] || die "OpenBLAS built with OpenMP not found: install libopenblas-openmp-dev (offline: the bundle's openblas-openmp-$OPENBLAS_VERSION.tar.gz), or set SOFTFUSE_BLAS_LIBRARIES to the BLAS library to link"
    KK_ARGS+=(-DBLAS_LIBRARIES=openblas -DBLAS_LIBRARY_DIRS="$BLAS_DIR"
              -DLAPACK_LIBRARIES=openblas -DLAPACK_LIBRARY_DIRS="$BLAS_DIR")
    BLAS_LIBS="$BLAS_DIR/libopenblas.so"
    KK_NAME=kokkos-kernels-openblas-openmp
    [[ -z $OFFLINE ]] || BLAS_RUNTIME_DIR=$BLAS_DIR
  fi
fi
KK_PREFIX=$CFG_DIR/$KK_NAME

KOKKOS_KEY=$( { echo "v$BOOTSTRAP_VERSION kokkos $KOKKOS_SRC $HOST_CXX_ID $NVCC_ID"; printf '%s\n' "${KOKKOS_ARGS[@]}"; } | hash16)
cmake_build "Kokkos $KOKKOS_VERSION [$DEVICE_DESC]" "$KOKKOS_SRC" "$CFG_DIR/build/kokkos" "$KOKKOS_PREFIX" \
  "$KOKKOS_KEY" "${KOKKOS_ARGS[@]}"

KK_KEY=$( { echo "v$BOOTSTRAP_VERSION kokkos-kernels $KK_SRC $KOKKOS_KEY"; printf '%s\n' "${KK_ARGS[@]}"; } | hash16)
# Kokkos Kernels must be rebuilt whenever Kokkos was.
cmake_build "Kokkos Kernels $KOKKOS_VERSION [$DEVICE_DESC, ETI=$KK_ETI]" "$KK_SRC" "$CFG_DIR/build/$KK_NAME" "$KK_PREFIX" \
  "$KK_KEY" "${KK_ARGS[@]}"

ensure_test_deps

# ------------------------------------------------------------- deps.cmake --
pkg_version() { sed -n 's/^ *set(PACKAGE_VERSION "\([^"]*\)").*/\1/p' "$1" 2>/dev/null | head -n1; }
KOKKOS_BUILT_VERSION=$(pkg_version "$KOKKOS_PREFIX/lib/cmake/Kokkos/KokkosConfigVersion.cmake")
KK_BUILT_VERSION=$(pkg_version "$KK_PREFIX/lib/cmake/KokkosKernels/KokkosKernelsConfigVersion.cmake")
[[ -n $KOKKOS_BUILT_VERSION ]] || die "no KokkosConfigVersion.cmake under $KOKKOS_PREFIX"
[[ -n $KK_BUILT_VERSION ]] || die "no KokkosKernelsConfigVersion.cmake under $KK_PREFIX"

DEPS=$CFG_DIR/deps.cmake
if [[ $BACKEND == cuda ]]; then
  # Kokkos' nvcc_wrapper runs the nvcc on PATH, or in $CUDA_ROOT/bin: this one names the toolkit Kokkos was built
  # with, so that builds from deps.cmake need nothing on PATH.
  CXX_WRAPPER=$CFG_DIR/bin/nvcc_wrapper
  mkdir -p "$CFG_DIR/bin"
  printf '#!/bin/sh\n# Generated by softfuse scripts/bootstrap.sh: %s with the CUDA toolkit it was built with.\nCUDA_ROOT="%s"\nexport CUDA_ROOT\nexec "%s" "$@"\n' \
    "$KOKKOS_PREFIX/bin/nvcc_wrapper" "$CUDA_ROOT_DIR" "$KOKKOS_PREFIX/bin/nvcc_wrapper" >"$CXX_WRAPPER.tmp"
  chmod +x "$CXX_WRAPPER.tmp"
  mv "$CXX_WRAPPER.tmp" "$CXX_WRAPPER"
fi
{
  echo "# Generated by softfuse scripts/bootstrap.sh (v$BOOTSTRAP_VERSION); rerun it rather than editing."
  echo "# Use: cmake -S . -B build -C \"$DEPS\""
  echo "# backend=$BACKEND$([[ $BACKEND == cuda ]] && echo " arch=$ARCH") Kokkos=$KOKKOS_BUILT_VERSION [$DEVICE_DESC] KokkosKernels=$KK_BUILT_VERSION ETI=$KK_ETI"
  echo "set(SOFTFUSE_DEPS_BACKEND \"$BACKEND\" CACHE STRING \"Backend of the bootstrapped Kokkos\")"
  echo "set(Kokkos_ROOT \"$KOKKOS_PREFIX\" CACHE PATH \"\")"
  echo "set(KokkosKernels_ROOT \"$KK_PREFIX\" CACHE PATH \"\")"
  prefixes="$KOKKOS_PREFIX;$KK_PREFIX"
  if [[ -n $GTEST_PREFIX ]]; then
    echo "set(GTest_ROOT \"$GTEST_PREFIX\" CACHE PATH \"\")"; prefixes+=";$GTEST_PREFIX"
  fi
  if [[ -n $BENCHMARK_PREFIX ]]; then
    echo "set(benchmark_ROOT \"$BENCHMARK_PREFIX\" CACHE PATH \"\")"; prefixes+=";$BENCHMARK_PREFIX"
  fi
  echo "set(CMAKE_PREFIX_PATH \"$prefixes\" CACHE STRING \"\")"
  echo "# Kokkos 3.4 forces CXX extensions off (and warns when a project leaves them on)."
  echo "set(CMAKE_CXX_EXTENSIONS OFF CACHE BOOL \"\")"
  if [[ $BACKEND == cuda ]]; then
    echo "set(SOFTFUSE_DEPS_KOKKOS_ARCH \"$ARCH\" CACHE STRING \"Kokkos_ARCH_* the bootstrapped Kokkos was built for\")"
    echo "# Kokkos 3.4 CUDA is compiled through its nvcc_wrapper, here with CUDA_ROOT set to the toolkit below."
    echo "set(CMAKE_CXX_COMPILER \"$CXX_WRAPPER\" CACHE FILEPATH \"\")"
    echo "set(CUDAToolkit_ROOT \"$CUDA_ROOT_DIR\" CACHE PATH \"\")"
    echo "set(CMAKE_CUDA_COMPILER \"$CUDA_ROOT_DIR/bin/nvcc\" CACHE FILEPATH \"\")"
    echo "set(CMAKE_CUDA_ARCHITECTURES \"$CUDA_ARCH_NUM\" CACHE STRING \"\")"
  else
    echo "set(CMAKE_CXX_COMPILER \"$HOST_CXX\" CACHE FILEPATH \"\")"
  fi
  if [[ -n $BLAS_RUNTIME_DIR ]]; then
    echo "# Put this folder on LD_LIBRARY_PATH to link and run (the BLAS and its Fortran run time)."
    echo "set(SOFTFUSE_DEPS_LIBRARY_PATH \"$BLAS_RUNTIME_DIR\" CACHE PATH \"Run-time libraries of the bootstrapped BLAS\")"
  fi
} >"$DEPS.tmp"
mv "$DEPS.tmp" "$DEPS"

log "Kokkos $KOKKOS_BUILT_VERSION [$DEVICE_DESC] at $KOKKOS_PREFIX"
log "Kokkos Kernels $KK_BUILT_VERSION [ETI=$KK_ETI, TPL=$([[ $BACKEND == cuda ]] && echo cuBLAS || echo "BLAS:$BLAS_LIBS")] at $KK_PREFIX"
log "GoogleTest: ${GTEST_PREFIX:-system}   Google Benchmark: ${BENCHMARK_PREFIX:-system}"
log "total $((SECONDS - START_SECONDS)) s; deps file:"
echo "$DEPS"
