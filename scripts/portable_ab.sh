#!/usr/bin/env bash
# On the GPU machine: A/B of the portable row kernels, this tree (new) against a baseline source tree (base).
#
#   here:  mkdir -p .ab/base && git archive <baseline commit> | tar -x -C .ab/base     (.ab is ignored by git)
#   there: bash scripts/portable_ab.sh .ab/base [SHAPES]                  (carry .gpu_bundle and .ab)
#
# Builds softfuse_bench_portable_plans of both trees on the same machine, runs plan_rows' plan of the 14 shapes
# from each alternately (new, base, new, base), then the plan sweep of SHAPES (default 4096x393216,8192x32768) from
# this tree and its CUDA unit tests. Writes $OUT/ab.json (both sides' plans per round and the sweep), summary.txt
# and logs.tar.gz.
set -u
base_tree=${1:?usage: portable_ab.sh BASELINE_TREE [SHAPES]}
shapes=${2:-4096x393216,8192x32768}
OUT=${OUT:-build/gpu-out}
mkdir -p "$OUT"
logs=$(mktemp -d)
log() { echo "$*" | tee -a "$OUT/summary.txt"; }
t0=$SECONDS
deps=$(bash scripts/bootstrap.sh --backend cuda --arch HOPPER90 --offline .gpu_bundle 2>"$logs/bootstrap.log" | tail -n1)
[ -f "$deps" ] || { tail -20 "$logs/bootstrap.log"; exit 1; }
log "bootstrap $((SECONDS - t0)) s; $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader)"
cmake -S . -B build/cuda -G Ninja -C "$deps" -DCMAKE_BUILD_TYPE=Release >"$logs/new_configure.log" 2>&1 &
cmake -S "$base_tree" -B build/base -G Ninja -C "$deps" -DCMAKE_BUILD_TYPE=Release >"$logs/base_configure.log" 2>&1 &
wait
for side in cuda base; do
  (cmake --build build/$side -j 8 --target softfuse_bench_portable_plans >"$logs/${side}_build.log" 2>&1
   echo "$side build rc $?" >>"$logs/${side}_build.log") &
done
wait
tail -qn1 "$logs/cuda_build.log" "$logs/base_build.log" | tee -a "$OUT/summary.txt"
log "plan sweeps built at $((SECONDS - t0)) s"
(cmake --build build/cuda -j 12 --target softfuse_unit_cuda >"$logs/unit_build.log" 2>&1
 echo "unit build rc $?" >>"$logs/unit_build.log") &
unit_pid=$!
for r in 1 2; do
  build/cuda/perf/softfuse_bench_portable_plans --plans=chosen --json="$logs/ab_new_$r.json" >"$logs/ab_new_$r.txt"
  build/base/perf/softfuse_bench_portable_plans --plans=chosen --json="$logs/ab_base_$r.json" >"$logs/ab_base_$r.txt"
done
build/cuda/perf/softfuse_bench_portable_plans --shapes="$shapes" --json="$logs/sweep.json" >"$logs/sweep.txt"
grep -E "WRONG|plan_rows" "$logs/sweep.txt" | tee -a "$OUT/summary.txt"
python3 - "$logs" "$OUT/ab.json" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
logs, path = sys.argv[1], sys.argv[2]
out = {"method": "plan_rows' plan of each shape from this tree (new) and from the baseline tree (base), both built on "
       "the same machine and run alternately new, base, new, base; each: medians of 15 fenced calls, % of the copy of "
       "the same buffers in the same process", "rounds": [], "sweep": json.load(open(f"{logs}/sweep.json"))}
for r in (1, 2):
    for side in ("new", "base"):
        out["rounds"].append({"round": r, "side": side, "plans": json.load(open(f"{logs}/ab_{side}_{r}.json"))["plans"]})
json.dump(out, open(path, "w"), indent=1)
rows = {}
for rd in out["rounds"]:
    for p in rd["plans"]:
        rows.setdefault(p["shape"], {}).setdefault(rd["side"], []).append(round(100 * p["of_copy"], 1))
for s, v in rows.items():
    print(f"ab {s:>14} new {v.get('new')} base {v.get('base')}")
PY
grep -h WRONG "$logs"/ab_*.txt | tee -a "$OUT/summary.txt"
wait $unit_pid
tail -n1 "$logs/unit_build.log" | tee -a "$OUT/summary.txt"
build/cuda/tests/softfuse_unit_cuda >"$logs/unit_cuda.log" 2>&1
grep -E "^\[  (PASSED|FAILED) |FAILED" "$logs/unit_cuda.log" | head -20 | tee -a "$OUT/summary.txt"
tar czf "$OUT/logs.tar.gz" -C "$logs" .
log "total $((SECONDS - t0)) s"
