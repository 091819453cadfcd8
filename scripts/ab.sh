#!/usr/bin/env bash
# A/B of a change: this tree (new) against a baseline source tree (base), both built on the same machine and run
# alternately (base, new, base, new), so that both sides see the same clocks and the same memory.
#
#   here:  mkdir -p .ab/base && git archive <baseline commit> | tar -x -C .ab/base     (.ab is ignored by git)
#   bash scripts/ab.sh MODE .ab/base [SHAPES]
#
# MODE:
#   portable  (GPU machine; carry .gpu_bundle and .ab) softfuse_bench_portable_plans: plan_rows' plan of the 14
#             shapes (AB_SHAPES: some of them) from each side, then this tree's plan sweep of SHAPES (default
#             4096x393216,8192x32768; none: no sweep) and its CUDA unit tests, built while the rounds run
#   kernels   (GPU machine; carry .ab) softmax_kernels_bench of cuda_specialized as its own CMake project (no Kokkos)
#             on SHAPES (RxC,...: the benchmark's shapes, with their alternative plans), then this tree's full kernel
#             checks (test_softmax_kernels)
#   host      (any host; OpenMP, one thread per core, bound) softfuse_bench_softmax --host (its host shapes) and
#             softfuse_bench_linear on SHAPES (default 256x4096x4096) with the OpenMP OpenBLAS GEMM; first says
#             whether both sides' benchmark programs compile to the same machine code
# AB_VARIANTS (space-separated source trees, e.g. ".ab/v1 .ab/v2") adds sides of their own, each named by its folder,
# built and run with the two others (one baseline build for all); the full checks run on this tree, the variants
# take test_softmax_kernels --small (kernels mode).
# SOFTFUSE_CHECK_LIMIT (seconds, default 400) stops kernel checks that run longer.
# AB_ROUNDS (default 2) sets the rounds; SOFTFUSE_COMMIT and AB_BASE_COMMIT name both sides' commits in the results.
# Writes $OUT/ab.json (every run of both sides: side, round and the program's own JSON), summary.txt (a line per shape
# and plan: both sides' figures), rounds.txt (portable: each run's plans as it ends) and logs.tar.gz; ab.json and
# logs.tar.gz also as soon as the rounds end, so a run stopped in its checks keeps them. OUT defaults to build/ab-out.
set -u
mode=${1:?usage: ab.sh portable|kernels|host BASELINE_TREE [SHAPES]}
base_tree=${2:?usage: ab.sh portable|kernels|host BASELINE_TREE [SHAPES]}
shapes=${3:-}
script_args="$*"
OUT=${OUT:-build/ab-out}
rounds=${AB_ROUNDS:-2}
mkdir -p "$OUT"
logs=$(mktemp -d)
jobs=$(nproc)
log() { echo "$*" | tee -a "$OUT/summary.txt"; }
check_limit=${SOFTFUSE_CHECK_LIMIT:-400}  # seconds: kernel checks that run longer are stopped
t0=$SECONDS
declare -A src=([new]=. [base]="$base_tree")
sides="base new"
for tree in ${AB_VARIANTS:-}; do
  name=$(basename "$tree")
  [[ " $sides " != *" $name "* ]] || { echo "ab.sh: variant name $name taken" >&2; exit 2; }
  src[$name]=$tree
  sides="$sides $name"
done
nsides=$(wc -w <<<"$sides")

# build_sides NAME SOURCE_SUBDIR CMAKE_ARGS TARGETS: configures and builds every side at once (the cores shared out)
# in build/ab-SIDE-NAME
build_sides() {
  local dir=$1 sub=$2 args=$3 targets=$4 side source j=$((jobs > nsides ? jobs / nsides : 1))
  for side in $sides; do
    # a build folder configured for another tree cannot be reconfigured: start it afresh
    source=$(cd "${src[$side]}/$sub" && pwd)
    grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$source" "build/ab-$side-$dir/CMakeCache.txt" 2>/dev/null ||
      rm -rf "build/ab-$side-$dir"
    (cmake -S "${src[$side]}/$sub" -B "build/ab-$side-$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release $args \
       >"$logs/${side}_build.log" 2>&1 &&
     cmake --build "build/ab-$side-$dir" -j "$j" --target $targets \
       >>"$logs/${side}_build.log" 2>&1
     echo "$side build rc $?" >>"$logs/${side}_build.log") &
  done
  wait
  for side in $sides; do tail -n1 "$logs/${side}_build.log"; done | tee -a "$OUT/summary.txt"
  log "built at $((SECONDS - t0)) s"
  # no side runs an earlier build of its folder
  for side in $sides; do
    tail -n1 "$logs/${side}_build.log" | grep -q "rc 0$" && continue
    log "$side: build failed"
    tail -20 "$logs/${side}_build.log"
    tar -C "$logs" -czf "$OUT/logs.tar.gz" .
    exit 1
  done
}

case $mode in
  portable)
    shapes=${shapes:-4096x393216,8192x32768}
    deps=$(bash scripts/bootstrap.sh --backend cuda --arch HOPPER90 --offline .gpu_bundle 2>"$logs/bootstrap.log" | tail -n1)
    [ -f "$deps" ] || { tail -20 "$logs/bootstrap.log"; exit 1; }
    log "A/B portable on $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"
    build_sides cuda "" "-C $deps" softfuse_bench_portable_plans
    # the unit tests take longer to build than all rounds to run: built meanwhile, at the lowest priority, so
    # that the rounds start at once (both sides run under the same build load)
    (nice -n 19 cmake --build build/ab-new-cuda -j "$jobs" --target softfuse_unit_cuda >"$logs/unit_build.log" 2>&1
     echo "unit tests build rc $?" >>"$logs/unit_build.log") &
    unit_build=$!
    run() {
      "build/ab-$1-cuda/perf/softfuse_bench_portable_plans" --plans=chosen ${AB_SHAPES:+--shapes="$AB_SHAPES"} \
        --json="$2"
    }
    ;;
  kernels)
    [ -n "$shapes" ] || { echo "kernels: SHAPES required" >&2; exit 2; }
    log "A/B kernels on $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader); shapes $shapes"
    build_sides kernels cuda_specialized "" "softmax_kernels_bench test_softmax_kernels"
    run() { "build/ab-$1-kernels/perf/softmax_kernels_bench" --shapes "$shapes" --json "$2"; }
    ;;
  host)
    shapes=${shapes:-256x4096x4096}
    deps=$(bash scripts/bootstrap.sh --backend openmp 2>"$logs/bootstrap.log" | tail -n1)
    [ -f "$deps" ] || { tail -20 "$logs/bootstrap.log"; exit 1; }
    blas_path=$(sed -n 's/^set(SOFTFUSE_DEPS_LIBRARY_PATH "\([^"]*\)".*/\1/p' "$deps")
    export LD_LIBRARY_PATH="$blas_path${LD_LIBRARY_PATH:+${blas_path:+:}$LD_LIBRARY_PATH}"
    export OMP_NUM_THREADS=$jobs OMP_PROC_BIND=spread OMP_PLACES=threads
    log "A/B host on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $jobs threads"
    build_sides host "" "-C $deps -DSOFTFUSE_CUDA_SPECIALIZED=OFF -DSOFTFUSE_ENABLE_TESTS=OFF -DSOFTFUSE_ENABLE_EXAMPLES=OFF" \
      "softfuse_bench_softmax softfuse_bench_linear"
    # where both sides compile to the same machine code, their timings differ by noise only; the sections' bytes,
    # not their disassembly, which names symbols (a template argument added renames a function, not its code)
    for b in softfuse_bench_softmax softfuse_bench_linear; do
      same=differs
      cmp -s <(objdump -s -j .text -j .rodata "build/ab-base-host/perf/$b" | tail -n +3) \
        <(objdump -s -j .text -j .rodata "build/ab-new-host/perf/$b" | tail -n +3) && same=identical
      log "machine code of $b (.text and .rodata): $same"
    done
    run() {
      local b="build/ab-$1-host/perf"
      "$b/softfuse_bench_softmax" --host --benchmark_min_time=1 --benchmark_out="$2.softmax" --benchmark_out_format=json &&
      "$b/softfuse_bench_linear" --shapes="$shapes" --benchmark_min_time=1 --benchmark_out="$2.linear" \
        --benchmark_out_format=json &&
      python3 -c 'import json, sys; a, b = (json.load(open(p)) for p in sys.argv[2:])
json.dump({"context": a["context"], "benchmarks": a["benchmarks"] + b["benchmarks"]}, open(sys.argv[1], "w"))' \
        "$2" "$2.softmax" "$2.linear"
    }
    ;;
  *) echo "ab.sh: unknown mode $mode" >&2; exit 2 ;;
esac

# report 0|1: ab.json, logs.tar.gz and (1: at the end) a line per shape and plan in summary.txt: portable plans
# (of_copy), kernel plans (pct_of_copy), Google Benchmarks (median_ms, with of_copy or of_gemm where the benchmark
# gives one).
report() {
local sum=$OUT/summary.txt lines=/dev/null
[ "$1" = 1 ] && lines=$sum
python3 - "$mode" "$logs" "$OUT/ab.json" "AB_ROUNDS=$rounds${AB_VARIANTS:+ AB_VARIANTS=\"$AB_VARIANTS\"}${AB_SHAPES:+ AB_SHAPES=$AB_SHAPES} bash scripts/ab.sh $script_args" \
  "$rounds" "$sum" "$(for side in $sides; do echo -n "$side=${src[$side]} "; done)" <<'PY' | tee -a "$lines"
import datetime, json, os, sys
mode, logs, path, command, rounds, summary, sides = sys.argv[1:]
trees = dict(spec.split("=", 1) for spec in sides.split())
sides = list(trees)
out = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "command": command,
       "commit": os.environ.get("SOFTFUSE_COMMIT", "?"), "base_commit": os.environ.get("AB_BASE_COMMIT", "?"),
       "checks": [l.strip() for l in open(summary) if l.startswith(("machine code", "test_softmax_kernels", "[  "))],
       "trees": trees,
       "method": "this tree (new), the baseline tree (base) and any variant trees built on the same machine and run "
                 "alternately, every side once per round in that order; each side's figures as its program reports "
                 "them (medians, against the same-run copy or GEMM of the same buffers)", "runs": []}
rows = {}
for r in range(1, int(rounds) + 1):
    for side in sides:
        f = f"{logs}/{side}_{r}.json"
        if not os.path.exists(f):
            continue
        d = json.load(open(f))
        out["runs"].append({"side": side, "round": r, "result": d})
        if mode == "portable":
            items = [(p["shape"] + " " + p["plan"], round(100 * p["of_copy"], 1), True) for p in d["plans"]]
        elif mode == "kernels":
            items = [(f'{b["rows"]}x{b["cols"]} {b["plan"]}', b["pct_of_copy"], b["sample_check"]) for b in d["bench"]]
        else:
            items = [(b["name"], (round(b["median_ms"], 3), round(b.get("of_copy", b.get("of_gemm", 0)), 3)), True)
                     for b in d["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
        for key, value, ok in items:
            rows.setdefault(key, {}).setdefault(side, []).append(value)
            if not ok:
                print(f"WRONG {side} round {r}: {key}")
if os.path.exists(f"{logs}/sweep.json"):
    out["sweep"] = json.load(open(f"{logs}/sweep.json"))
json.dump(out, open(path, "w"), indent=1)
for key, v in rows.items():
    print(f"ab {key}: " + " ".join(f"{side} {v.get(side)}" for side in sides))
PY
tar -C "$logs" -czf "$OUT/logs.tar.gz" .
}

for r in $(seq "$rounds"); do
  for side in $sides; do
    run "$side" "$logs/${side}_$r.json" >"$logs/${side}_$r.txt" 2>&1 || log "$side round $r failed: $(tail -n3 "$logs/${side}_$r.txt")"
    # the portable plans' lines as they come, so a run stopped before the end still reports its rounds
    [ "$mode" = portable ] && grep -E "plan_rows|WRONG" "$logs/${side}_$r.txt" | sed "s/^/$side $r: /" >>"$OUT/rounds.txt"
  done
done
report 0

case $mode in
  portable)
    if [ "$shapes" != none ]; then
      build/ab-new-cuda/perf/softfuse_bench_portable_plans --shapes="$shapes" --json="$logs/sweep.json" >"$logs/sweep.txt"
      grep -E "WRONG|plan_rows" "$logs/sweep.txt" | tee -a "$OUT/summary.txt"
      report 0 >/dev/null  # the sweep into ab.json and logs.tar.gz before the unit tests' build is waited for
    fi
    wait "$unit_build"
    log "$(tail -n1 "$logs/unit_build.log") at $((SECONDS - t0)) s"
    build/ab-new-cuda/tests/softfuse_unit_cuda >"$logs/unit_cuda.log" 2>&1
    grep -E "^\[  (PASSED|FAILED) |FAILED" "$logs/unit_cuda.log" | head -20 | tee -a "$OUT/summary.txt"
    ;;
  kernels)
    timeout "$check_limit" build/ab-new-kernels/tests/test_softmax_kernels >"$logs/check.txt" 2>&1
    grep -E "^(PASSED|FAILED)" "$logs/check.txt" | sed 's/^/test_softmax_kernels (new, full): /' | tee -a "$OUT/summary.txt"
    for side in $sides; do
      [ "$side" = base ] || [ "$side" = new ] && continue
      timeout "$check_limit" "build/ab-$side-kernels/tests/test_softmax_kernels" --small \
        >"$logs/check_$side.txt" 2>&1
      grep -E "^(PASSED|FAILED)" "$logs/check_$side.txt" | sed "s/^/test_softmax_kernels ($side, small): /" |
        tee -a "$OUT/summary.txt"
    done
    ;;
esac

report 1
log "total $((SECONDS - t0)) s"
