#!/usr/bin/env bash
# One pass on a GPU machine, from the repository root:
#   perf/cuda_specialized/run_device.sh OUTDIR [build] [sass] [check] [bench] [torch] [ncu] [sanitize]
# (no step named: all of them). At most six files land in OUTDIR: cuda_softmax.json, bench.log,
# torch_softmax.json, torch.log, tools.log (ncu, memcheck, racecheck), misc.log (GPU state,
# build log, SASS opcode histogram, resource usage). A short summary is printed last.
set -u
OUT=${1:?OUTDIR}; shift
STEPS=" ${*:-build sass check bench torch ncu sanitize} "
has() { [[ "$STEPS" == *" $1 "* ]]; }
mkdir -p "$OUT"
MISC="$OUT/misc.log"; TOOLS="$OUT/tools.log"
BIN=build_gpu/softmax_kernels_bench
SRC="perf/cuda_specialized/softmax_kernels_bench.cu cuda_specialized/src/softmax_dispatch.cu cuda_specialized/src/softmax_warp.cu cuda_specialized/src/softmax_block.cu cuda_specialized/src/softmax_cluster.cu cuda_specialized/src/softmax_split.cu"
FLAGS="-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 -Xcompiler -fopenmp -Icuda_specialized/include -Icuda_specialized/src"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv; nvcc --version | tail -2; } >> "$MISC" 2>&1
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
  cuobjdump -sass -fun '_ZN8softfuse16cuda_specialized4impl18softmax_row_kernelIfLi4ELi512ELi0ELb1ELi512EEEvNS1_7RowArgsIT_EE' \
    build_dev_obj/softmax_cluster.o 2>&1 | grep -oE "^\s+/\*[0-9a-f]+\*/\s+(@!?U?P[0-9T] )?[A-Z][A-Z0-9._]+" \
    | awk '{print $NF}' | sort | uniq -c | sort -rn >> "$MISC"
  echo "== resource usage" >> "$MISC"
  for o in softmax_cluster softmax_block softmax_warp; do cuobjdump --dump-resource-usage "build_dev_obj/$o.o" >> "$MISC" 2>&1; done
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-16}
RC=0
ARGS=""
has check && ARGS="$ARGS --check"
has bench && ARGS="$ARGS --bench"
if [[ -n "$ARGS" ]]; then
  $BIN $ARGS --json "$OUT/cuda_softmax.json" > "$OUT/bench.log" 2>&1 || RC=$?
  echo "bench rc=$RC"
fi
if has torch; then
  PYTHONUNBUFFERED=1 timeout 300 python3 perf/torch_baseline/softmax_torch.py --json "$OUT/torch_softmax.json" > "$OUT/torch.log" 2>&1
  echo "torch rc=$?"
fi
if has ncu; then
  for shape in 512x393216 128x1048576; do
    echo "== ncu $shape" >> "$TOOLS"
    timeout 120 ncu --clock-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
      -k regex:softmax_row --launch-count 1 $BIN --profile $shape >> "$TOOLS" 2>&1
    echo "ncu $shape rc=$?"
  done
fi
if has sanitize || has memcheck; then
  echo "== memcheck" >> "$TOOLS"
  timeout 150 compute-sanitizer --tool memcheck --print-limit 20 $BIN --check-small > "$OUT/san.tmp" 2>&1; r=$?
  echo "memcheck rc=$r"; grep -vE "^ok " "$OUT/san.tmp" >> "$TOOLS"; echo "memcheck rc=$r, $(grep -c '^ok ' "$OUT/san.tmp") cases ok" >> "$TOOLS"
fi
if has sanitize; then
  echo "== racecheck" >> "$TOOLS"
  timeout 180 compute-sanitizer --tool racecheck --racecheck-report all --print-limit 20 $BIN --check-small > "$OUT/san.tmp" 2>&1; r=$?
  echo "racecheck rc=$r"; grep -vE "^ok " "$OUT/san.tmp" >> "$TOOLS"; echo "racecheck rc=$r, $(grep -c '^ok ' "$OUT/san.tmp") cases ok" >> "$TOOLS"
  rm -f "$OUT/san.tmp"
fi
rm -f "$OUT/san.tmp"
echo "==== summary"
head -n 3 "$MISC"
grep -E "^device|^on-chip|^checks:|FAIL|^shape|^alternative|PASSED|FAILED|not run" "$OUT/bench.log" 2>/dev/null | cut -c1-220
grep -E "^torch" "$OUT/torch.log" 2>/dev/null
grep -E "^== |^profile|dram__bytes|gpu__time|ERROR SUMMARY|RACECHECK SUMMARY|rc=" "$TOOLS" 2>/dev/null | cut -c1-160
grep -A 25 "SASS opcode" "$MISC" 2>/dev/null | tr -s ' ' | tr '\n' ' '; echo
exit $RC
