#!/usr/bin/env bash
# On the GPU machine (offline; carry .gpu_bundle made by scripts/pack_gpu_bundle.sh): builds the
# dependencies and softfuse with CUDA, runs the unit tests (CUDA, Serial and the install tests), then
# the benchmarks, and writes logs and JSON results under $OUT.
#
#   bash scripts/gpu_run.sh [test|bench|all|sanitize|host] [ARCH]       (default: all HOPPER90)
#
# host times the host path instead: the softmax benchmark on the host execution space (OpenMP, one
# thread per core, --host: 4096x65536, 65536x1024, 64x1048576 against a parallel copy) and the reference
# framework on the CPU with as many threads (perf/torch_baseline/cpu_torch.py: the same softmax shapes and
# the fused layers), into bench_softmax_host.json and torch_cpu.json.
# sanitize builds only the standalone kernel drivers (nvcc, no Kokkos) and runs compute-sanitizer memcheck,
# racecheck and initcheck over their --check-sanitize sets: every CUDA kernel of softfuse on small shapes.
# SOFTFUSE_CMAKE_ARGS adds configure arguments (e.g. -DSOFTFUSE_CUDA_SPECIALIZED=OFF),
# SOFTFUSE_CTEST_ARGS ctest arguments (e.g. -E unit_serial).
# $OUT receives at most 8 files (what the device tool returns): logs.tar.gz (with the raw Google
# Benchmark files bench_softmax.json and bench_fused.json), torch_softmax.json, results.json (those
# benchmarks condensed by perf/summarize_benchmarks.py, with date, device, command and commit),
# summary.txt, and from the fused layers' driver and the reference framework fused_kernels.json,
# fused_full_clocks.json (the tf32 layers at full clocks), torch_fused.json and their chart
# fused_layers.png (perf/plot_fused.py).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
script_args="$*"
what=${1:-all}
arch=${2:-HOPPER90}
OUT=${OUT:-$root/build/gpu-out}
logs=$(mktemp -d)
mkdir -p "$OUT"
build=$root/build/cuda
jobs=$(nproc)
status=0
summary() { echo "$*" | tee -a "$OUT/summary.txt"; }
stage() {  # stage NAME COMMAND…: runs, logs to $logs/NAME.log, records the outcome
  local name=$1; shift
  local t0=$SECONDS
  echo "== $name" >&2
  if "$@" >"$logs/$name.log" 2>&1; then
    summary "ok     $name ($((SECONDS - t0)) s)"
  else
    summary "FAILED $name ($((SECONDS - t0)) s): tail of $name.log:"
    tail -n 30 "$logs/$name.log" | tee -a "$OUT/summary.txt"
    status=1
  fi
}
finish() {
  local jsons=$(ls "$OUT"/bench_*.json 2>/dev/null)
  [ -z "$jsons" ] || python3 perf/summarize_benchmarks.py --command "bash scripts/gpu_run.sh $script_args" \
    --commit "$commit" $jsons >"$OUT/results.json" 2>>"$logs/summarize.log"
  [ -z "$jsons" ] || mv $jsons "$logs/"  # condensed in results.json; the raw files travel in logs.tar.gz
  tar -C "$logs" -czf "$OUT/logs.tar.gz" .
  exit $status
}

summary "softfuse GPU run $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
commit=$(cat .gpu_bundle/commit.txt 2>/dev/null || git rev-parse --short HEAD 2>/dev/null)
summary "commit $commit; $what $arch"
nvidia-smi >"$logs/nvidia-smi.log" 2>&1

if [ "$what" = sanitize ]; then
  flags="-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 -Xcompiler -fopenmp"
  flags="$flags -Icuda_specialized/include -Icuda_specialized/src"
  mkdir -p "$build-drivers"
  for driver in softmax_kernels_bench fused_kernels_bench; do
    stage "build_$driver" nvcc $flags perf/cuda_specialized/$driver.cu cuda_specialized/src/*.cu -lcublasLt -lcublas \
      -o "$build-drivers/$driver"
  done
  [ $status -eq 0 ] || finish
  for tool in memcheck racecheck initcheck; do
    for driver in softmax_kernels_bench fused_kernels_bench; do
      extra=""; [ $tool = racecheck ] && extra="--racecheck-report all"
      stage "${tool}_$driver" compute-sanitizer --tool $tool $extra --error-exitcode 9 --print-limit 50 \
        "$build-drivers/$driver" --check-sanitize
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^checks:|cases" "$logs/${tool}_$driver.log" | sed "s/^/  $tool $driver: /" |
        tee -a "$OUT/summary.txt"
    done
  done
  finish
fi

stage bootstrap bash -c "bash scripts/bootstrap.sh --backend cuda --arch $arch --offline .gpu_bundle > '$logs/deps-path'"
deps=$(tail -n1 "$logs/deps-path" 2>/dev/null)
[ -f "$deps" ] || finish
stage configure cmake -S . -B "$build" -G Ninja -C "$deps" -DCMAKE_BUILD_TYPE=Release ${SOFTFUSE_CMAKE_ARGS:-}
stage build cmake --build "$build" -j "$jobs"
[ $status -eq 0 ] || finish

if [ "$what" = host ]; then
  cores=$(nproc)
  export OMP_NUM_THREADS=$cores OMP_PROC_BIND=spread OMP_PLACES=threads
  stage bench_softmax_host "$build/perf/softfuse_bench_softmax" --host --benchmark_out="$OUT/bench_softmax_host.json" \
    --benchmark_out_format=json --benchmark_min_time=1
  grep -E "^host_" "$logs/bench_softmax_host.log" | sed 's/ bytes_per_second=[^ ]*//' | tee -a "$OUT/summary.txt"
  stage torch_cpu python3 perf/torch_baseline/cpu_torch.py --threads "$cores" --json "$OUT/torch_cpu.json"
  grep -E "^torch" "$logs/torch_cpu.log" | tee -a "$OUT/summary.txt"
  finish
fi

if [ "$what" != bench ]; then
  export OMP_PROC_BIND=false
  stage ctest ctest --test-dir "$build" --output-on-failure --timeout 1200 ${SOFTFUSE_CTEST_ARGS:-}
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$logs/ctest.log" | tee -a "$OUT/summary.txt"
fi

if [ "$what" != test ]; then
  stage bench_softmax "$build/perf/softfuse_bench_softmax" --benchmark_out="$OUT/bench_softmax.json" \
    --benchmark_out_format=json --benchmark_min_time=0.2
  grep -E "^(copy|softmax)" "$logs/bench_softmax.log" | sed 's/ bytes_per_second=[^ ]*//' | tee -a "$OUT/summary.txt"
  if [ -x "$build/perf/softfuse_bench_fused" ]; then
    stage bench_fused "$build/perf/softfuse_bench_fused" --benchmark_out="$OUT/bench_fused.json" \
      --benchmark_out_format=json
    grep -E "^[a-z]" "$logs/bench_fused.log" | grep -v "^Run\|^Load" | tee -a "$OUT/summary.txt"
  fi
  if [ -x "$build/perf/fused_kernels_bench" ]; then
    stage fused_kernels "$build/perf/fused_kernels_bench" --check --bench --json "$OUT/fused_kernels.json"
    grep -E "^(bench|FAIL|checks)" "$logs/fused_kernels.log" | grep -v lt_sweep | tee -a "$OUT/summary.txt"
    # the tf32 layers against cuBLAS alone at full clocks: 8 s idle before each of 5 rounds
    stage fused_full_clocks "$build/perf/fused_kernels_bench" --quick --rounds 5 --cool 8 \
      --json "$OUT/fused_full_clocks.json"
    grep -E "^bench" "$logs/fused_full_clocks.log" | tee -a "$OUT/summary.txt"
    stage torch_fused python3 perf/torch_baseline/fused_torch.py --json "$OUT/torch_fused.json"
    grep -E "^torch" "$logs/torch_fused.log" | tee -a "$OUT/summary.txt"
    stage plot_fused python3 perf/plot_fused.py "$OUT/fused_kernels.json" "$OUT/torch_fused.json" \
      -o "$OUT/fused_layers.png"
  fi
  if [ -f perf/torch_baseline/softmax_torch.py ]; then
    stage torch_softmax python3 perf/torch_baseline/softmax_torch.py --json "$OUT/torch_softmax.json"
    tail -n 12 "$logs/torch_softmax.log" | tee -a "$OUT/summary.txt"
  fi
fi
finish
