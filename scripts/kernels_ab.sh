#!/usr/bin/env bash
# On the GPU machine: A/B of the CUDA softmax kernels alone, this tree (new) against a baseline source tree (base).
#
#   here:  mkdir -p .ab/base && git archive <baseline commit> | tar -x -C .ab/base     (.ab is ignored by git)
#   there: bash scripts/kernels_ab.sh .ab/base SHAPES                                  (carry .ab)
#
# Builds softmax_kernels_bench of both trees (cuda_specialized as its own CMake project, no Kokkos) on the same
# machine, runs it on SHAPES (RxC,...: the benchmark's shapes with their alternative plans) alternately base, new,
# base, new, then this tree's full kernel checks (test_softmax_kernels). Writes $OUT/kernels_ab.json (every run,
# each with its side and round), summary.txt and logs.tar.gz.
set -u
base_tree=${1:?usage: kernels_ab.sh BASELINE_TREE SHAPES}
shapes=${2:?usage: kernels_ab.sh BASELINE_TREE SHAPES}
OUT=${OUT:-build/gpu-out}
mkdir -p "$OUT"
logs=$(mktemp -d)
log() { echo "$*" | tee -a "$OUT/summary.txt"; }
t0=$SECONDS
log "kernels A/B on $(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader); shapes $shapes"
declare -A src=([new]=cuda_specialized [base]="$base_tree/cuda_specialized")
for side in new base; do
  (cmake -S "${src[$side]}" -B "build/kernels-$side" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$logs/${side}_build.log" 2>&1 &&
   cmake --build "build/kernels-$side" -j 8 --target softmax_kernels_bench test_softmax_kernels >>"$logs/${side}_build.log" 2>&1
   echo "$side build rc $?" >>"$logs/${side}_build.log") &
done
wait
tail -qn1 "$logs/new_build.log" "$logs/base_build.log" | tee -a "$OUT/summary.txt"
log "built at $((SECONDS - t0)) s"
for r in 1 2; do
  for side in base new; do
    "build/kernels-$side/perf/softmax_kernels_bench" --shapes "$shapes" --json "$logs/${side}_$r.json" \
      >"$logs/${side}_$r.txt" 2>&1
  done
done
"build/kernels-new/tests/test_softmax_kernels" >"$logs/check.txt" 2>&1
grep -E "^(PASSED|FAILED)" "$logs/check.txt" | sed 's/^/test_softmax_kernels (new, full): /' | tee -a "$OUT/summary.txt"
python3 - "$logs" "$OUT/kernels_ab.json" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
logs, path = sys.argv[1], sys.argv[2]
runs = []
for r in (1, 2):
    for side in ("base", "new"):
        d = json.load(open(f"{logs}/{side}_{r}.json"))
        d.update(side=side, round=r)
        runs.append(d)
out = {"date": runs[0].get("date"), "device": runs[0].get("device"),
       "method": "softmax_kernels_bench of this tree (new) and of the baseline tree (base), both built on the same "
                 "machine, run alternately base, new, base, new; each entry CUDA events, median of the timed launches, "
                 "% of the same-run device copy of the same buffers, sampled outputs checked against fp64",
       "runs": runs}
json.dump(out, open(path, "w"), indent=1)
rows = {}
for d in runs:
    for b in d["bench"]:
        key = f'{b["rows"]}x{b["cols"]} {b["plan"]}'
        rows.setdefault(key, {}).setdefault(d["side"], []).append(b["pct_of_copy"])
        if not b.get("sample_check", True):
            print(f"WRONG {d['side']} {key}")
for k, v in rows.items():
    print(f"ab {k}: base {v.get('base')} new {v.get('new')}")
PY
tar -C "$logs" -czf "$OUT/logs.tar.gz" .
log "done at $((SECONDS - t0)) s"
