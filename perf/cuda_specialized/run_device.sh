#!/usr/bin/env bash
# One pass on a GPU machine, from the repository root:
#   perf/cuda_specialized/run_device.sh OUTDIR [build] [sass] [bench] [torch] [check] [sanitize] [ncu]
# (no step named: all of them). Without `build` it uses the binary carried in build_gpu/ (built
# with the nvcc command in NOTES.md). Steps run in this order: build, sass, bench (alone on the GPU:
# timing), torch (eager and torch.compile; TORCH_ARGS=--no-compile for eager only), then check
# and sanitize side by side (no timing: the full --check suite and compute-sanitizer memcheck,
# racecheck, initcheck and synccheck on --check-sanitize, each its own process), then ncu.
# At most eight files land in OUTDIR: bench.json, bench.log, check.json, check.log,
# torch_softmax.json, torch.log, tools.log (sanitizer summaries and findings, ncu),
# misc.log (GPU state, build log, SASS opcode histogram, resource usage). A summary is printed last.
set -u
OUT=${1:?OUTDIR}; shift
STEPS=" ${*:-build sass bench torch check sanitize ncu} "
has() { [[ "$STEPS" == *" $1 "* ]]; }
mkdir -p "$OUT"
MISC="$OUT/misc.log"; TOOLS="$OUT/tools.log"
BIN=build_gpu/softmax_kernels_bench
SAN_TIMEOUT=${SAN_TIMEOUT:-200}
SRC="perf/cuda_specialized/softmax_kernels_bench.cu cuda_specialized/src/softmax_dispatch.cu cuda_specialized/src/softmax_warp.cu cuda_specialized/src/softmax_block.cu cuda_specialized/src/softmax_cluster.cu cuda_specialized/src/softmax_split.cu cuda_specialized/src/softmax_stream.cu"
FLAGS="-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 -Xcompiler -fopenmp -Icuda_specialized/include -Icuda_specialized/src"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv; nvcc --version | tail -2; compute-sanitizer --version | head -3; } >> "$MISC" 2>&1
if has build; then
  mkdir -p build_dev_obj
  t0=$(date +%s)
  pids=()
  for f in $SRC; do
    nvcc $FLAGS -c "$f" -o "build_dev_obj/$(basename "$f" .cu).o" > "build_dev_obj/$(basename "$f" .cu).log" 2>&1 & pids+=($!)
  done
  ok=1; for p in "${pids[@]}"; do wait "$p" || ok=0; done
  cat build_dev_obj/*.log >> "$MISC"
  if [[ $ok == 1 ]] && nvcc $FLAGS build_dev_obj/*.o -o build_dev_obj/softmax_kernels_bench >> "$MISC" 2>&1; then
    BIN=build_dev_obj/softmax_kernels_bench
    echo "built on the device in $(( $(date +%s) - t0 )) s"
  else
    echo "device build failed (see misc.log); using the carried binary"
  fi
fi
if has sass && [[ -f build_dev_obj/softmax_cluster.o ]]; then
  echo "== SASS opcode histogram, fp32 cluster kernel (vec 4, 512 threads, kr 0)" >> "$MISC"
  cuobjdump -sass -fun '_ZN8softfuse16cuda_specialized4impl18softmax_row_kernelIfLi4ELi512ELi0ELNS1_7RowJoinE1ELi512EEEvNS1_7RowArgsIT_EE' \
    build_dev_obj/softmax_cluster.o 2>&1 | grep -oE "^\s+/\*[0-9a-f]+\*/\s+(@!?U?P[0-9T] )?[A-Z][A-Z0-9._]+" \
    | awk '{print $NF}' | sort | uniq -c | sort -rn >> "$MISC"
  echo "== resource usage" >> "$MISC"
  for o in softmax_cluster softmax_block softmax_warp; do cuobjdump --dump-resource-usage "build_dev_obj/$o.o" >> "$MISC" 2>&1; done
fi
RC=0
if has bench; then
  t0=$(date +%s)
  OMP_NUM_THREADS=16 $BIN --bench --json "$OUT/bench.json" > "$OUT/bench.log" 2>&1 || RC=$?
  echo "bench rc=$RC ($(( $(date +%s) - t0 )) s)"
fi
if has torch; then
  t0=$(date +%s)
  PYTHONUNBUFFERED=1 timeout 300 python3 perf/torch_baseline/softmax_torch.py ${TORCH_ARGS:-} --json "$OUT/torch_softmax.json" > "$OUT/torch.log" 2>&1
  echo "torch rc=$? ($(( $(date +%s) - t0 )) s)"
fi
# Correctness work, no timing: side by side.
pids=(); names=()
if has check; then
  OMP_NUM_THREADS=8 $BIN --check --json "$OUT/check.json" > "$OUT/check.log" 2>&1 & pids+=($!); names+=(check)
fi
if has sanitize; then
  for tool in memcheck racecheck initcheck synccheck; do
    extra=""; args=""
    [[ $tool == racecheck ]] && extra="--racecheck-report all"
    # synccheck faulted (illegal address) on the first cluster-16 case of the 2026-11-22 run, where
    # memcheck and racecheck ran the same case clean: clusters of up to 8 under synccheck
    [[ $tool == synccheck ]] && args="--max-cluster 8"
    ( s0=$(date +%s)
      OMP_NUM_THREADS=2 timeout "$SAN_TIMEOUT" compute-sanitizer --tool $tool $extra --print-limit 50 \
        $BIN --check-sanitize $args > "/tmp/san_$tool.log" 2>&1
      echo "rc=$? seconds=$(( $(date +%s) - s0 ))" >> "/tmp/san_$tool.log" ) & pids+=($!); names+=($tool)
  done
fi
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"; r=$?
  [[ ${names[$i]} == check ]] && { echo "check rc=$r"; [[ $r != 0 ]] && RC=$r; }
done
if has sanitize; then
  for tool in memcheck racecheck initcheck synccheck; do
    f="/tmp/san_$tool.log"
    {
      echo "== compute-sanitizer --tool $tool $([[ $tool == racecheck ]] && echo '--racecheck-report all ')softmax_kernels_bench --check-sanitize$([[ $tool == synccheck ]] && echo ' --max-cluster 8')"
      echo "$(grep -c '^ok ' "$f") cases ok, $(grep -c '^FAIL' "$f") failed, $(grep -c '^skip ' "$f") skipped; regimes/plans covered:"
      grep -E '^(ok|FAIL) ' "$f" | awk '{k=""; on=0; for(i=1;i<=NF;i++){ if ($i ~ /^(warp|warprow|block|cluster|group|split)$/) on=1; if ($i=="max_rel") break; if (on && $i !~ /^(ks|chunk|group_rows|grid)=/) k=k" "$i }; print k}' | sort | uniq -c
      grep -vE '^(ok|device|on-chip|skip) ' "$f" | head -n 200
    } >> "$TOOLS"
  done
fi
if has ncu; then
  for shape in 512x393216 128x1048576; do
    echo "== ncu $shape" >> "$TOOLS"
    timeout 120 ncu --clock-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
      -k regex:softmax_row --launch-count 1 $BIN --profile $shape >> "$TOOLS" 2>&1
    echo "ncu $shape rc=$?"
  done
fi
echo "==== summary"
head -n 3 "$MISC"
grep -E "^device|^checks:|FAIL|^shape|^repeat|^fenced|^offset|^alternative|^host|PASSED|FAILED|not run" "$OUT/bench.log" "$OUT/check.log" 2>/dev/null | cut -c1-230
grep -E "^torch" "$OUT/torch.log" 2>/dev/null
grep -E "^== |cases ok|ERROR SUMMARY|RACECHECK SUMMARY|^rc=|dram__bytes|gpu__time" "$TOOLS" 2>/dev/null | cut -c1-200
exit $RC
