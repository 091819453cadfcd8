#!/usr/bin/env bash
# Pack everything the (offline) GPU machine needs to bootstrap softfuse's
# dependencies into one folder of compressed tarballs:
#
#   bash scripts/pack_gpu_bundle.sh [OUT_DIR]      # default: <repo>/.gpu_bundle (git-ignored)
#
# then, on the GPU machine (carry .gpu_bundle):
#
#   deps=$(bash scripts/bootstrap.sh --backend cuda --offline .gpu_bundle | tail -n1)
#
# Contents (pristine upstream sources; bootstrap.sh applies scripts/patches itself):
#   kokkos-3.4.01.tar.gz          Kokkos from Debian's trilinos 13.2.0-4, without docs/tests/examples
#   kokkos-kernels-3.4.01.tar.gz  Kokkos Kernels, likewise
#   googletest-1.12.1.tar.gz      from /usr/src/googletest (Debian googletest 1.12.1)
#   benchmark-1.7.1.tar.gz        Debian's benchmark 1.7.1 orig tarball
#   openblas-openmp-0.3.21.tar.gz lib/: Debian's OpenBLAS built with OpenMP (libopenblas0-openmp) and the
#                                 libgfortran5 and libquadmath0 it needs, for the OpenMP-only build of
#                                 `gpu_run.sh host` (bootstrap.sh --backend openmp --offline)
#   patches.tar.gz                a copy of scripts/patches (for reference)
#   MANIFEST.txt                  origins and sha256 sums
#
# Runs online (Debian 12): it reuses bootstrap.sh's cache (SOFTFUSE_DEPS_DIR) for the
# downloads. Tarballs are reproducible (sorted, mtime 0, no owner), so an
# unchanged bundle keeps its hashes and the GPU side's stamps stay valid.
set -Eeuo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SCRIPT_DIR/.." && pwd)
OUT=${1:-$REPO/.gpu_bundle}
readonly KOKKOS_VERSION=3.4.01 GTEST_VERSION=1.12.1 BENCHMARK_VERSION=1.7.1 OPENBLAS_VERSION=0.3.21

log() { printf '[pack %4ss] %s\n' "$SECONDS" "$*" >&2; }
die() { printf '\n[pack] ERROR: %s\n' "$*" >&2; exit 1; }
trap 'printf "\n[pack] ERROR: command failed at line %s: %s\n" "$LINENO" "$BASH_COMMAND" >&2' ERR

case ${1:-} in -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 0 ;; esac

mkdir -p "$(dirname "$OUT")"
OUT=$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")
if [[ -e $OUT && ! -f $OUT/MANIFEST.txt ]] && [[ -n $(ls -A "$OUT" 2>/dev/null) ]]; then
  die "$OUT exists, is not empty and holds no MANIFEST.txt: refusing to overwrite it"
fi

# 1. Sources: Debian trilinos (Kokkos, Kokkos Kernels) and benchmark, via bootstrap's cache.
log "fetching sources (bootstrap.sh --fetch-sources)"
info=$(bash "$SCRIPT_DIR/bootstrap.sh" --fetch-sources)
PRISTINE=$(printf '%s\n' "$info" | sed -n 's/^PRISTINE=//p')
BENCHMARK_TARBALL=$(printf '%s\n' "$info" | sed -n 's/^BENCHMARK_TARBALL=//p')
[[ -d $PRISTINE/kokkos && -d $PRISTINE/kokkos-kernels ]] || die "bootstrap.sh gave no Kokkos sources ($PRISTINE)"
[[ -f $BENCHMARK_TARBALL ]] || die "bootstrap.sh gave no benchmark tarball ($BENCHMARK_TARBALL)"

GTEST_SRC=/usr/src/googletest
[[ -f $GTEST_SRC/CMakeLists.txt ]] || die "$GTEST_SRC not found: apt-get install googletest"
grep -q "GOOGLETEST_VERSION $GTEST_VERSION" "$GTEST_SRC/CMakeLists.txt" \
  || die "$GTEST_SRC is not GoogleTest $GTEST_VERSION"

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/softfuse-bundle.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/src" "$STAGE/out"

# Reproducible gzip'd tar of DIR (relative to a parent) into FILE.
rtar() { # FILE PARENT DIR
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu \
      -C "$2" -cf - "$3" | gzip -9n >"$1"
}

# 2. Strip what a library-only build never reads. Kokkos' CMake adds example/
# unconditionally (its own subdirectories only with Kokkos_ENABLE_EXAMPLES), so
# example/CMakeLists.txt stays; test/perf/example directories are only entered
# when their ENABLE_TESTS/EXAMPLES options are on.
log "staging stripped Kokkos and Kokkos Kernels"
cp -a "$PRISTINE/kokkos" "$PRISTINE/kokkos-kernels" "$STAGE/src/"
(
  cd "$STAGE/src/kokkos"
  rm -rf doc benchmarks scripts config appveyor.yml tpls/gtest \
         core/unit_test core/perf_test containers/unit_tests containers/performance_tests \
         algorithms/unit_tests
  find example -mindepth 1 -maxdepth 1 ! -name CMakeLists.txt -exec rm -rf {} +
)
(
  cd "$STAGE/src/kokkos-kernels"
  rm -rf doc unit_test perf_test example test_common scripts install_test
)
rtar "$STAGE/out/kokkos-$KOKKOS_VERSION.tar.gz" "$STAGE/src" kokkos
rtar "$STAGE/out/kokkos-kernels-$KOKKOS_VERSION.tar.gz" "$STAGE/src" kokkos-kernels

log "packing GoogleTest $GTEST_VERSION from $GTEST_SRC"
mkdir -p "$STAGE/gt"
cp -a "$GTEST_SRC" "$STAGE/gt/googletest-$GTEST_VERSION"
rtar "$STAGE/out/googletest-$GTEST_VERSION.tar.gz" "$STAGE/gt" "googletest-$GTEST_VERSION"

log "adding Google Benchmark $BENCHMARK_VERSION (Debian orig tarball)"
cp "$BENCHMARK_TARBALL" "$STAGE/out/benchmark-$BENCHMARK_VERSION.tar.gz"

# The installed Debian library files (bootstrap.sh --backend openmp installs libopenblas-openmp-dev).
package_file() { # PACKAGE NAME: the path of the file NAME that PACKAGE installed
  local list
  list=$(dpkg -L "$1" 2>/dev/null) || die "$1 is not installed (apt-get install $1)"
  printf '%s\n' "$list" | grep -m1 "/$2\$" || die "$1 installed no $2"
}
log "packing OpenBLAS $OPENBLAS_VERSION (OpenMP) with its Fortran run time"
blas_version=$(dpkg-query -W -f='${Version}' libopenblas0-openmp 2>/dev/null || true)
[[ $blas_version == "$OPENBLAS_VERSION"* ]] || die "libopenblas0-openmp $OPENBLAS_VERSION is not installed (found '$blas_version')"
mkdir -p "$STAGE/blas/lib"
cp -L "$(package_file libopenblas0-openmp openblas-openmp/libopenblas.so.0)" "$STAGE/blas/lib/libopenblas.so.0"
ln -s libopenblas.so.0 "$STAGE/blas/lib/libopenblas.so"
cp -L "$(package_file libgfortran5 libgfortran.so.5)" "$(package_file libquadmath0 libquadmath.so.0)" "$STAGE/blas/lib/"
rtar "$STAGE/out/openblas-openmp-$OPENBLAS_VERSION.tar.gz" "$STAGE/blas" lib

rtar "$STAGE/out/patches.tar.gz" "$SCRIPT_DIR" patches

{
  echo "softfuse GPU bundle (made by scripts/pack_gpu_bundle.sh)"
  echo "use: bash scripts/bootstrap.sh --backend cuda|openmp --offline <this dir>"
  echo
  echo "kokkos-$KOKKOS_VERSION.tar.gz, kokkos-kernels-$KOKKOS_VERSION.tar.gz: packages/kokkos{,-kernels} of Debian source package trilinos 13.2.0-4 (pristine, docs/tests/examples removed)"
  echo "googletest-$GTEST_VERSION.tar.gz: /usr/src/googletest of Debian package googletest $(dpkg-query -W -f='${Version}' googletest 2>/dev/null || echo '?')"
  echo "benchmark-$BENCHMARK_VERSION.tar.gz: $(basename "$BENCHMARK_TARBALL") of Debian source package benchmark 1.7.1-1"
  echo "openblas-openmp-$OPENBLAS_VERSION.tar.gz: libopenblas.so.0 of Debian package libopenblas0-openmp $blas_version, libgfortran.so.5 of libgfortran5 $(dpkg-query -W -f='${Version}' libgfortran5), libquadmath.so.0 of libquadmath0 $(dpkg-query -W -f='${Version}' libquadmath0)"
  echo "patches.tar.gz: copy of scripts/patches (bootstrap.sh applies the repository's own copy)"
  echo
  (cd "$STAGE/out" && sha256sum -- *.tar.gz)
} >"$STAGE/out/MANIFEST.txt"

rm -rf "$OUT"
mkdir -p "$OUT"
cp "$STAGE/out/"* "$OUT/"
log "bundle: $OUT ($(du -sh "$OUT" | cut -f1))"
(cd "$OUT" && ls -l -- * | awk '{printf "  %10s  %s\n", $5, $9}') >&2
echo "$OUT"
