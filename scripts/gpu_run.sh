#!/usr/bin/env bash
# On the GPU machine (offline; carry .gpu_bundle made by scripts/pack_gpu_bundle.sh): builds the
# dependencies and softfuse with CUDA, runs the unit tests (CUDA, Serial and the install tests), then
# the benchmarks, and writes logs and JSON results under $OUT.
#
#   bash scripts/gpu_run.sh [test|bench|all|sanitize|kernels|kernels-profile|distributed|host|portable|
#                            portable-profile|fp32-gemm|tc-gemm|fused-api] [ARCH]
#   (default: all HOPPER90)
#
# sanitize builds only the kernel tests (cuda_specialized as a CMake project of its own, no Kokkos), runs their
# full suites, then compute-sanitizer memcheck, racecheck and initcheck over their --sanitize sets: every CUDA kernel of
# softfuse on small shapes.
# kernels builds the softmax kernels' project alone (as sanitize does), runs their full checks, then
# softmax_kernels_bench (cuda_softmax_kernels.json) and the reference framework's softmax (torch_softmax.json), both on
# SOFTFUSE_KERNEL_SHAPES when set (RxC,...: the benchmark's shapes, with their alternative plans), else on all shapes.
# distributed builds softfuse with MPI (Open MPI, /usr/bin/mpirun) and NCCL in build/cuda-distributed, runs the
# softfuse::distributed tests on 1, 2 (and 4) GPUs, one rank each, over MPI and over NCCL, then the weak-scaling
# runs of `softfuse --distributed` (each GPU holding a 4096 x 393216 softmax shard, 1024 rows of the
# 1024 x 8192 x 8192 BatchNorm layer, 8192 features of the GELU layer) on 1, 2 (and 4) GPUs, and writes
# distributed_scaling.json (perf/distributed_scaling.py: per-step medians, efficiency against one GPU).
# host times the host path instead, built without CUDA (Kokkos OpenMP+Serial, Kokkos Kernels on the bundle's
# OpenMP OpenBLAS, in build/openmp-host): the softmax benchmark (one OpenMP thread per core, bound:
# 4096x65536, 65536x1024, 64x1048576 against a parallel copy), the plan sweep of those shapes (host_plans.json),
# the fused layers with the host GEMM alone
# (1024x8192x8192, 256x4096x4096), and the reference framework on the CPU with as many threads
# (perf/torch_baseline/cpu_torch.py: the same softmax shapes and layers), into results.json (with the raw
# bench_softmax_host.json and bench_fused_host.json in logs.tar.gz) and torch_cpu.json. SOFTFUSE_HOST_QUICK=1
# (for a small host) shortens the runs and takes only 256x4096x4096 for the layers.
# fp32-gemm builds the kernels' project alone (as sanitize does), runs the fused layers' kernel tests, then the fp32
# GEMM configurations and the fp32 layers at full clocks (linear_kernels_bench --fp32-full-clocks) against the reference
# framework's fp32 matmul and layers timed the same way (linear_torch.py --full-clocks), with cuBLASLt's trace of each
# side in logs.tar.gz (fp32_gemm_softfuse.json, fp32_gemm_torch.json; softfuse's side once more under Kokkos'
# device-wide cache preference, fp32_gemm_softfuse_prefer_shared.json). tc-gemm does the same for the TF32 and 3xTF32
# GEMMs and layers (tc_layers_full_clocks*.json). fused-api builds softfuse with Kokkos, runs the CUDA unit tests, the
# fp32 layers through the public API (examples/softfuse) at full clocks (fp32_layers_api.json), the CLI's
# CUDA-vs-OpenMP cross-check, the layers' Google Benchmark against the GEMM they call (bench_fused.json in
# results.json) and the reference framework's fp32 side again (fp32_gemm_torch.json).
# portable builds only the CUDA unit tests, the CLI and the portable path's benchmarks, runs the unit tests on CUDA,
# the CLI's CUDA-vs-OpenMP cross-check of each implementation, the plan sweep (perf/bench/portable_plans_bench.cpp:
# every candidate plan of the 14 shapes, portable_plans.json), the softmax benchmark (copy, portable, specialized)
# and the reference framework's softmax on the same shapes.
# kernels-profile builds the softmax kernels' project alone with -lineinfo, runs their full checks, then profiles the default
# plan's kernel of each of SOFTFUSE_PROFILE_SHAPES with Nsight Compute's full set (ncu_SHAPE.txt).
# SOFTFUSE_PLAN_SHAPES limits portable's plan sweep to those shapes (e.g. 4096x393216,8192x32768).
# SOFTFUSE_REPEAT_SHAPES (RxC,...): portable then times the copy and the CUDA kernels through the API on those shapes
# once more, and the reference framework after them (bench_softmax_repeat.json, torch_softmax_repeat.json and the
# clock log in logs.tar.gz).
# portable-profile builds the plan sweep only, times the plans of SOFTFUSE_PLAN_SHAPES (default: the profiled shapes)
# and profiles plan_rows' kernels on SOFTFUSE_PROFILE_SHAPES with Nsight Compute (ncu_SHAPE.txt).
# SOFTFUSE_COMMIT names the commit in the results (the GPU machine has no git history).
# SOFTFUSE_CMAKE_ARGS adds configure arguments (e.g. -DSOFTFUSE_CUDA_SPECIALIZED=OFF),
# SOFTFUSE_CHECK_LIMIT (seconds, default 400) stops the kernel checks of sanitize and kernels where they run longer.
# SOFTFUSE_CTEST_ARGS ctest arguments (e.g. -E unit_serial). SOFTFUSE_SKIP_STAGES skips the stages it names
# (e.g. "portable_plans bench_softmax torch_softmax plot_softmax": portable's build and unit tests alone).
# $OUT receives at most 8 files (what the device tool returns): logs.tar.gz (with the raw Google
# Benchmark files bench_softmax.json and bench_fused.json), torch_softmax.json, results.json (those
# benchmarks condensed by perf/summarize_benchmarks.py, with date, device, command and commit),
# summary.txt, and from the fused layers' driver and the reference framework fused_kernels.json,
# fused_full_clocks.json (the tf32 layers at full clocks), torch_fused.json and their chart
# fused_layers.png (perf/plot_linear.py).
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
# the kernel checks' full suites take 65-95 s on the H100 and H200: a kernel that never returns (a persistent grid
# waiting on a partial no block publishes) is stopped here instead of holding the machine until its own limit
check_limit=${SOFTFUSE_CHECK_LIMIT:-400}
status=0
summary() { echo "$*" | tee -a "$OUT/summary.txt"; }
stage() {  # stage NAME COMMAND…: runs, logs to $logs/NAME.log, records the outcome
  local name=$1; shift
  local t0=$SECONDS
  if [[ " ${SOFTFUSE_SKIP_STAGES:-} " == *" $name "* ]]; then summary "skipped $name"; return 0; fi
  echo "== $name" >&2
  if "$@" >"$logs/$name.log" 2>&1; then
    summary "ok     $name ($((SECONDS - t0)) s)"
  else
    summary "FAILED $name ($((SECONDS - t0)) s): tail of $name.log:"
    tail -n 30 "$logs/$name.log" | tee -a "$OUT/summary.txt"
    status=1
  fi
}
# clock_log NAME COMMAND…: stage NAME while nvidia-smi logs the SM and memory clocks, power, temperature and the
# reasons for lowered clocks every 100 ms into NAME_clocks.csv (in logs.tar.gz): whether the GPU held its clocks
# through a benchmark, e.g. between its fenced and its back-to-back timings.
clock_log() {
  local name=$1 fields="timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu" reasons smi
  for reasons in clocks_event_reasons.active clocks_throttle_reasons.active; do
    nvidia-smi --query-gpu="$reasons" --format=csv,noheader >/dev/null 2>&1 && { fields="$fields,$reasons"; break; }
  done
  nvidia-smi --query-gpu="$fields" --format=csv -lms 100 >"$logs/${name}_clocks.csv" 2>&1 &
  smi=$!
  stage "$@"
  kill "$smi" 2>/dev/null
  wait "$smi" 2>/dev/null
}
finish() {
  local jsons=$(ls "$OUT"/bench_*.json 2>/dev/null)
  [ -z "$jsons" ] || python3 perf/summarize_benchmarks.py --command "bash scripts/gpu_run.sh $script_args" \
    --commit "$commit" $jsons >"$OUT/results.json" 2>>"$logs/summarize.log"
  [ -z "$jsons" ] || mv $jsons "$logs/"  # condensed in results.json; the raw files travel in logs.tar.gz
  tar -C "$logs" -czf "$OUT/logs.tar.gz" .
  exit $status
}

add_context() {  # add_context FILE WHAT: records the command and commit in a JSON result, in place
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d.update(command=sys.argv[2], commit=sys.argv[3])
json.dump(d, open(sys.argv[1], "w"), indent=1)' "$1" "bash scripts/gpu_run.sh $script_args ($2)" "$commit"
}

plans_json() {  # the plan sweep's JSON with date, command and commit
  python3 -c 'import json, sys, datetime; d = json.load(open(sys.argv[1]))
print(json.dumps({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "command": sys.argv[2], "commit": sys.argv[3], **d}, indent=1))' "$1" \
    "bash scripts/gpu_run.sh $script_args (softfuse_bench_portable_plans)" "$commit"
}

summary "softfuse GPU run $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
commit=${SOFTFUSE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || cat .gpu_bundle/commit.txt 2>/dev/null)}
summary "commit $commit; $what $arch"
nvidia-smi >"$logs/nvidia-smi.log" 2>&1

if [ "$what" = sanitize ]; then
  kernels=$root/build/cuda-kernels
  tests="test_softmax_kernels test_linear_kernels"
  stage configure_kernels cmake -S cuda_specialized -B "$kernels" -G Ninja -DCMAKE_BUILD_TYPE=Release
  stage build_kernel_tests cmake --build "$kernels" -j "$jobs" --target $tests
  [ $status -eq 0 ] || finish
  # the full kernel checks first (every regime and its boundaries against fp64, no sanitizer)
  for test in $tests; do
    stage "check_$test" timeout "$check_limit" "$kernels/tests/$test"
    grep -E "^(PASSED|FAILED)" "$logs/check_$test.log" | sed "s/^/  $test (full): /" | tee -a "$OUT/summary.txt"
  done
  for tool in memcheck racecheck initcheck; do
    for test in $tests; do
      extra=""; [ $tool = racecheck ] && extra="--racecheck-report all"
      stage "${tool}_$test" compute-sanitizer --tool $tool $extra --error-exitcode 9 --print-limit 50 \
        "$kernels/tests/$test" --sanitize
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^(PASSED|FAILED)" "$logs/${tool}_$test.log" | sed "s/^/  $tool $test: /" |
        tee -a "$OUT/summary.txt"
    done
  done
  finish
fi

if [ "$what" = kernels ]; then
  kernels=$root/build/cuda-kernels
  shapes=${SOFTFUSE_KERNEL_SHAPES:-}
  stage configure_kernels cmake -S cuda_specialized -B "$kernels" -G Ninja -DCMAKE_BUILD_TYPE=Release
  stage build_kernels cmake --build "$kernels" -j "$jobs" --target test_softmax_kernels softmax_kernels_bench
  [ $status -eq 0 ] || finish
  stage check_test_softmax_kernels timeout "$check_limit" "$kernels/tests/test_softmax_kernels"
  grep -E "^(PASSED|FAILED)" "$logs/check_test_softmax_kernels.log" | tee -a "$OUT/summary.txt"
  [ $status -eq 0 ] || finish  # no benchmark of kernels that fail their checks
  clock_log softmax_kernels_bench "$kernels/perf/softmax_kernels_bench" ${shapes:+--shapes "$shapes"} \
    --json "$OUT/cuda_softmax_kernels.json"
  [ -f "$OUT/cuda_softmax_kernels.json" ] && add_context "$OUT/cuda_softmax_kernels.json" softmax_kernels_bench
  grep -E "^(shape|alternative|sweep|offset) " "$logs/softmax_kernels_bench.log" | tee -a "$OUT/summary.txt"
  stage torch_softmax python3 perf/torch_baseline/softmax_torch.py ${shapes:+--shapes "$shapes"} \
    --json "$OUT/torch_softmax.json"
  grep -E "^torch" "$logs/torch_softmax.log" | tee -a "$OUT/summary.txt"
  finish
fi

if [ "$what" = kernels-profile ]; then
  # the default plan of each of SOFTFUSE_PROFILE_SHAPES, one launch each, under Nsight Compute's full set (stall
  # reasons by source line: the kernels built with -lineinfo), after the full kernel checks
  kernels=$root/build/cuda-kernels-lineinfo
  shapes=${SOFTFUSE_PROFILE_SHAPES:-512x524288,4096x393216,128x1048576}
  stage configure_kernels cmake -S cuda_specialized -B "$kernels" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_FLAGS=-lineinfo
  stage build_kernels cmake --build "$kernels" -j "$jobs" --target test_softmax_kernels softmax_kernels_bench
  [ $status -eq 0 ] || finish
  stage check_test_softmax_kernels timeout "$check_limit" "$kernels/tests/test_softmax_kernels"
  grep -E "^(PASSED|FAILED)" "$logs/check_test_softmax_kernels.log" | tee -a "$OUT/summary.txt"
  for shape in ${shapes//,/ }; do
    stage "ncu_$shape" ncu --clock-control none --kernel-name-base demangled -k "regex:softmax_.*kernel" \
      --launch-count 1 --set full --import-source no "$kernels/perf/softmax_kernels_bench" --profile "$shape"
    cp "$logs/ncu_$shape.log" "$OUT/ncu_$shape.txt"
  done
  finish
fi

if [ "$what" = fp32-gemm ] || [ "$what" = tc-gemm ]; then
  kernels=$root/build/cuda-kernels
  bench=$kernels/perf/linear_kernels_bench
  stage configure_kernels cmake -S cuda_specialized -B "$kernels" -G Ninja -DCMAKE_BUILD_TYPE=Release
  stage build_linear cmake --build "$kernels" -j "$jobs" --target test_linear_kernels linear_kernels_bench
  [ $status -eq 0 ] || finish
  stage test_linear_kernels "$kernels/tests/test_linear_kernels"
  grep -E "^(PASSED|FAILED)" "$logs/test_linear_kernels.log" | tee -a "$OUT/summary.txt"
  if [ "$what" = tc-gemm ]; then
    # cuBLAS TF32 alone and the library's TF32 and 3xTF32 GEMMs and layers at full clocks (4 s idle before each
    # block of 10 calls, two rounds), under the driver's default cache preference and under Kokkos' device-wide one
    for pref in "" --prefer-shared; do
      name=tc_layers_full_clocks${pref:+_prefer_shared}
      stage "$name" "$bench" --tc-full-clocks $pref --iters 10 --rounds 2 --cool 4 --json "$OUT/$name.json"
      add_context "$OUT/$name.json" "linear_kernels_bench --tc-full-clocks $pref"
      grep -E "^summary" "$logs/$name.log" | sed "s/^/${pref:-default preference}: /" | tee -a "$OUT/summary.txt"
    done
    finish
  fi
  # the algorithms each side runs, from cuBLASLt's trace of a short run
  stage lt_trace_softfuse env CUBLASLT_LOG_LEVEL=2 CUBLASLT_LOG_FILE="$logs/lt_trace_softfuse.txt" "$bench" \
    --fp32-full-clocks --iters 5 --rounds 1 --cool 0
  stage lt_trace_torch env CUBLASLT_LOG_LEVEL=2 CUBLASLT_LOG_FILE="$logs/lt_trace_torch.txt" python3 \
    perf/torch_baseline/linear_torch.py --full-clocks --iters 5 --rounds 1 --cool 0
  # both sides at full clocks: 4 s idle before each block of 10 calls, three rounds
  stage fp32_softfuse "$bench" --fp32-full-clocks --iters 10 --rounds 3 --cool 4 --json "$OUT/fp32_gemm_softfuse.json"
  add_context "$OUT/fp32_gemm_softfuse.json" "linear_kernels_bench --fp32-full-clocks"
  grep -E "^(candidate|summary)" "$logs/fp32_softfuse.log" | tee -a "$OUT/summary.txt"
  # again under the device-wide preference for shared memory that Kokkos' CUDA initialization sets
  stage fp32_softfuse_prefer_shared "$bench" --fp32-full-clocks --prefer-shared --iters 10 --rounds 3 --cool 4 \
    --json "$OUT/fp32_gemm_softfuse_prefer_shared.json"
  add_context "$OUT/fp32_gemm_softfuse_prefer_shared.json" "linear_kernels_bench --fp32-full-clocks --prefer-shared"
  grep -E "^summary" "$logs/fp32_softfuse_prefer_shared.log" | sed 's/^/prefer shared: /' | tee -a "$OUT/summary.txt"
  stage fp32_torch python3 perf/torch_baseline/linear_torch.py --full-clocks --iters 10 --rounds 3 --cool 4 \
    --json "$OUT/fp32_gemm_torch.json"
  add_context "$OUT/fp32_gemm_torch.json" "perf/torch_baseline/linear_torch.py --full-clocks"
  grep -E "^(kernels|summary)" "$logs/fp32_torch.log" | tee -a "$OUT/summary.txt"
  finish
fi

if [ "$what" = fused-api ]; then
  # the fp32 layers through the public API (the CLI: each layer after its KokkosBlas GEMM alone, medians of 10), 4 s idle
  # before each, three rounds; then the CUDA-vs-OpenMP cross-check on a quarter-size workload
  stage bootstrap bash -c "bash scripts/bootstrap.sh --backend cuda --arch $arch --offline .gpu_bundle > '$logs/deps-path'"
  deps=$(tail -n1 "$logs/deps-path" 2>/dev/null)
  [ -f "$deps" ] || finish
  stage configure cmake -S . -B "$build" -G Ninja -C "$deps" -DCMAKE_BUILD_TYPE=Release ${SOFTFUSE_CMAKE_ARGS:-}
  stage build_api cmake --build "$build" -j "$jobs" --target softfuse_cli softfuse_unit_cuda softfuse_bench_linear
  [ $status -eq 0 ] || finish
  stage unit_cuda "$build/tests/softfuse_unit_cuda" ${SOFTFUSE_GTEST_ARGS:-}
  grep -E "^\[  (PASSED|FAILED) |tests ran" "$logs/unit_cuda.log" | tee -a "$OUT/summary.txt"
  cli=$build/examples/softfuse
  for round in 1 2 3; do
    for layer in "linear_gelu_softmax" "linear_batchnorm_softmax --mode training" \
      "linear_batchnorm_softmax --mode inference"; do
      sleep 4
      name=$(echo "$layer" | tr -d - | tr ' ' _)
      stage "api_${name}_$round" "$cli" $layer --precision fp32 --reps 10 --check-rows 4
      sed -n 's/^  time */'"$name round $round: "'/p' "$logs/api_${name}_$round.log" | tee -a "$logs/api_times.txt"
    done
  done
  python3 - "$logs/api_times.txt" "bash scripts/gpu_run.sh $script_args (examples/softfuse, 4 s idle before each)" \
    "$commit" >"$OUT/fp32_layers_api.json" <<'PY'
import datetime, json, re, subprocess, sys
rows = []
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) round (\d+): ([\d.]+) ms .*gemm alone \(KokkosBlas\) ([\d.]+) ms", line)
    if m:
        rows.append({"layer": m[1], "round": int(m[2]), "ms": float(m[3]), "gemm_alone_ms": float(m[4])})
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
print(json.dumps({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "device": gpu.stdout.strip(), "command": sys.argv[2], "commit": sys.argv[3], "results": rows}, indent=1))
PY
  tee -a "$OUT/summary.txt" <"$logs/api_times.txt"
  stage cross_check "$cli" all --size 0.25 --cross-check
  grep -E "check|cross" "$logs/cross_check.log" | tee -a "$OUT/summary.txt"
  # the fused layers through the public API, each alternating with the GEMM it calls (Google Benchmark)
  stage bench_fused "$build/perf/softfuse_bench_linear" --benchmark_out="$OUT/bench_fused.json" \
    --benchmark_out_format=json
  grep -E "^[a-z]" "$logs/bench_fused.log" | grep -v "^Run\|^Load" | tee -a "$OUT/summary.txt"
  stage fp32_torch python3 perf/torch_baseline/linear_torch.py --full-clocks --iters 10 --rounds 3 --cool 4 \
    --json "$OUT/fp32_gemm_torch.json"
  add_context "$OUT/fp32_gemm_torch.json" "perf/torch_baseline/linear_torch.py --full-clocks"
  grep -E "^(kernels|summary)" "$logs/fp32_torch.log" | tee -a "$OUT/summary.txt"
  finish
fi

if [ "$what" = host ]; then
  hbuild=$root/build/openmp-host
  stage bootstrap_openmp bash -c "bash scripts/bootstrap.sh --backend openmp --offline .gpu_bundle > '$logs/deps-path'"
  deps=$(tail -n1 "$logs/deps-path" 2>/dev/null)
  [ -f "$deps" ] || finish
  # the bundle's OpenBLAS and its Fortran run time, for the build (the linker resolves their dependencies) and the
  # benchmarks; not for the reference framework, which brings its own
  blas_path=$(sed -n 's/^set(SOFTFUSE_DEPS_LIBRARY_PATH "\([^"]*\)".*/\1/p' "$deps")
  with_blas() { LD_LIBRARY_PATH="$blas_path${LD_LIBRARY_PATH:+${blas_path:+:}$LD_LIBRARY_PATH}" "$@"; }
  stage configure_host with_blas cmake -S . -B "$hbuild" -G Ninja -C "$deps" -DCMAKE_BUILD_TYPE=Release \
    -DSOFTFUSE_CUDA_SPECIALIZED=OFF -DSOFTFUSE_ENABLE_TESTS=OFF -DSOFTFUSE_ENABLE_EXAMPLES=OFF ${SOFTFUSE_CMAKE_ARGS:-}
  stage build_host with_blas cmake --build "$hbuild" -j "$jobs" --target softfuse_bench_softmax softfuse_bench_linear \
    softfuse_bench_portable_plans
  [ $status -eq 0 ] || finish
  cores=$(nproc)
  summary "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $cores threads"
  export OMP_NUM_THREADS=$cores OMP_PROC_BIND=spread OMP_PLACES=threads
  # OpenBLAS 0.3.21 takes its generic (Prescott) kernels on a CPU model it does not know, as virtual machines
  # that hide the model present; name its kernels by the instruction set instead, unless the caller did
  if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
    elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
  fi
  summary "host: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(detected)}"
  min_time=1 fused_shapes=1024x8192x8192,256x4096x4096 torch_args=""
  if [ "${SOFTFUSE_HOST_QUICK:-0}" = 1 ]; then
    min_time=0.2 fused_shapes=256x4096x4096 torch_args="--iters 5 --fused-shapes 256x4096x4096"
  fi
  stage bench_softmax_host with_blas "$hbuild/perf/softfuse_bench_softmax" --host \
    --benchmark_out="$OUT/bench_softmax_host.json" --benchmark_out_format=json --benchmark_min_time=$min_time
  grep -E "^host_" "$logs/bench_softmax_host.log" | sed 's/ bytes_per_second=[^ ]*//' | tee -a "$OUT/summary.txt"
  stage host_plans with_blas "$hbuild/perf/softfuse_bench_portable_plans" --reps=10 --json="$logs/host_plans.json"
  plans_json "$logs/host_plans.json" >"$OUT/host_plans.json"
  grep -E "of copy" "$logs/host_plans.log" | tee -a "$OUT/summary.txt"
  # OPENBLAS_VERBOSE=2: OpenBLAS names the kernels it picked for this CPU in the log
  stage bench_fused_host with_blas env OPENBLAS_VERBOSE=2 "$hbuild/perf/softfuse_bench_linear" --shapes=$fused_shapes \
    --benchmark_out="$OUT/bench_fused_host.json" --benchmark_out_format=json --benchmark_min_time=$min_time
  grep -E "^(gemm|linear)|^Core" "$logs/bench_fused_host.log" | tee -a "$OUT/summary.txt"
  stage torch_cpu python3 perf/torch_baseline/cpu_torch.py --threads "$cores" --commit "$commit" $torch_args \
    --json "$OUT/torch_cpu.json"
  grep -E "^torch" "$logs/torch_cpu.log" | tee -a "$OUT/summary.txt"
  finish
fi

stage bootstrap bash -c "bash scripts/bootstrap.sh --backend cuda --arch $arch --offline .gpu_bundle > '$logs/deps-path'"
deps=$(tail -n1 "$logs/deps-path" 2>/dev/null)
[ -f "$deps" ] || finish
if [ "$what" = distributed ]; then
  export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_PROC_BIND=false
  gpus=$(nvidia-smi -L | grep -c '^GPU')
  counts="1"; [ "$gpus" -ge 2 ] && counts="1;2"; [ "$gpus" -ge 4 ] && counts="1;2;4"
  summary "distributed: $gpus GPUs, rank counts $counts; $(mpirun --version 2>&1 | head -n1)"
  dbuild=$build-distributed
  stage configure_distributed cmake -S . -B "$dbuild" -G Ninja -C "$deps" -DCMAKE_BUILD_TYPE=Release \
    -DSOFTFUSE_ENABLE_MPI=ON -DSOFTFUSE_ENABLE_NCCL=ON -DSOFTFUSE_ENABLE_BENCHMARKS=OFF \
    "-DSOFTFUSE_DISTRIBUTED_GPU_RANKS=$counts" -DSOFTFUSE_DISTRIBUTED_RANKS=2 ${SOFTFUSE_CMAKE_ARGS:-}
  stage build_distributed cmake --build "$dbuild" -j "$jobs" --target softfuse_cli softfuse_distributed_cuda \
    softfuse_distributed_cuda_nccl
  [ $status -eq 0 ] || finish
  stage ctest_distributed ctest --test-dir "$dbuild" --output-on-failure --timeout 900 -R "^softfuse_distributed_cuda"
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$logs/ctest_distributed.log" | tee -a "$OUT/summary.txt"
  for engine in mpi nccl; do
    flag=""; [ $engine = nccl ] && flag=--nccl
    for n in ${counts//;/ }; do
      # small: every workload checked against the single-process operation on the gathered data
      stage "check_${engine}_np$n" mpirun -np "$n" "$dbuild/examples/softfuse" --distributed all --size 0.05 \
        $flag --kokkos-num-devices="$n"
      grep -E "^  (check|cross)|^result" "$logs/check_${engine}_np$n.log" | sed "s/^/  $engine np$n: /" |
        tee -a "$OUT/summary.txt"
      for w in softmax batchnorm gelu; do
        stage "scale_${engine}_${w}_np$n" mpirun -np "$n" "$dbuild/examples/softfuse" --distributed $w $flag \
          --reps 20 --kokkos-num-devices="$n" --json "$logs/scale_${engine}_${w}_np$n.json"
        grep -E "^  (time|check)" "$logs/scale_${engine}_${w}_np$n.log" | sed "s/^/  $engine $w np$n: /" |
          tee -a "$OUT/summary.txt"
      done
    done
  done
  python3 perf/distributed_scaling.py --command "bash scripts/gpu_run.sh $script_args" --commit "$commit" \
    "$logs"/scale_*.json >"$OUT/distributed_scaling.json" 2>>"$logs/summarize.log"
  python3 perf/distributed_scaling.py --table "$OUT/distributed_scaling.json" | tee -a "$OUT/summary.txt"
  finish
fi

stage configure cmake -S . -B "$build" -G Ninja -C "$deps" -DCMAKE_BUILD_TYPE=Release ${SOFTFUSE_CMAKE_ARGS:-}
if [ "$what" = portable ]; then
  # a skipped unit_cuda stage leaves its target unbuilt (the longest build of all)
  unit_target=softfuse_unit_cuda
  [[ " ${SOFTFUSE_SKIP_STAGES:-} " != *" unit_cuda "* ]] || unit_target=
  stage build cmake --build "$build" -j "$jobs" --target $unit_target softfuse_cli softfuse_bench_softmax \
    softfuse_bench_portable_plans
  [ $status -eq 0 ] || finish
  stage unit_cuda "$build/tests/softfuse_unit_cuda" ${SOFTFUSE_GTEST_ARGS:-}
  grep -E "^\[  (PASSED|FAILED) |tests ran" "$logs/unit_cuda.log" | tee -a "$OUT/summary.txt"
  for impl in portable specialized; do
    stage "cross_check_$impl" "$build/examples/softfuse" all --size 0.25 --implementation $impl --cross-check
    grep -E "^  cross|^result" "$logs/cross_check_$impl.log" | tee -a "$OUT/summary.txt"
  done
  stage portable_plans "$build/perf/softfuse_bench_portable_plans" ${SOFTFUSE_PLAN_SHAPES:+--shapes=$SOFTFUSE_PLAN_SHAPES} \
    --json="$logs/plans.json"
  if [ -f "$logs/plans.json" ]; then
    plans_json "$logs/plans.json" >"$OUT/portable_plans.json"
    grep -E "plan_rows|WRONG" "$logs/portable_plans.log" | tee -a "$OUT/summary.txt"
  fi
  clock_log bench_softmax "$build/perf/softfuse_bench_softmax" --benchmark_out="$OUT/bench_softmax.json" \
    --benchmark_out_format=json --benchmark_min_time=0.2
  grep -E "^(copy|softmax)" "$logs/bench_softmax.log" | sed 's/ bytes_per_second=[^ ]*//' | tee -a "$OUT/summary.txt"
  stage torch_softmax python3 perf/torch_baseline/softmax_torch.py --json "$OUT/torch_softmax.json"
  tail -n 16 "$logs/torch_softmax.log" | tee -a "$OUT/summary.txt"
  if [ -n "${SOFTFUSE_REPEAT_SHAPES:-}" ]; then
    # a second round of both sides on these shapes (copy and the CUDA kernels through the API, then the reference
    # framework), so that each comparison has two samples in alternation; raw results in logs.tar.gz
    filter="^(copy|softmax_specialized)/(${SOFTFUSE_REPEAT_SHAPES//,/|})/"  # names end in /real_time
    clock_log bench_softmax_repeat "$build/perf/softfuse_bench_softmax" --benchmark_filter="$filter" \
      --benchmark_out="$logs/bench_softmax_repeat.json" --benchmark_out_format=json --benchmark_min_time=0.2
    stage torch_softmax_repeat python3 perf/torch_baseline/softmax_torch.py --shapes "$SOFTFUSE_REPEAT_SHAPES" \
      --json "$logs/torch_softmax_repeat.json"
  fi
  python3 perf/summarize_benchmarks.py --command "bash scripts/gpu_run.sh $script_args" --commit "$commit" \
    "$OUT/bench_softmax.json" >"$logs/softmax_summary.json" 2>>"$logs/summarize.log"
  stage plot_softmax python3 perf/plot_softmax.py --card "$logs/softmax_summary.json" "$OUT/torch_softmax.json" \
    perf/results/h100/cuda_softmax_kernels.json -o "$OUT/softmax_gbps.png"
  finish
fi
if [ "$what" = portable-profile ]; then
  shapes=${SOFTFUSE_PROFILE_SHAPES:-4096x393216,8192x32768}
  plans=$build/perf/softfuse_bench_portable_plans
  stage build cmake --build "$build" -j "$jobs" --target softfuse_bench_portable_plans
  [ $status -eq 0 ] || finish
  stage portable_plans "$plans" --shapes="${SOFTFUSE_PLAN_SHAPES:-$shapes}" --json="$logs/plans.json"
  plans_json "$logs/plans.json" >"$OUT/portable_plans.json"
  grep -E "of copy" "$logs/portable_plans.log" | tee -a "$OUT/summary.txt"
  # one launch of each row kernel of plan_rows' plan, after two warm calls: launch, occupancy, memory, warp states
  for shape in ${shapes//,/ }; do
    stage "ncu_$shape" ncu --clock-control none --kernel-name-base demangled -k "regex:RowFunctor|RowsFunctor|ChunksFunctor|SplitStats|SplitWrite" --launch-skip 2 \
      --launch-count 2 --section LaunchStats --section Occupancy --section SpeedOfLight --section WarpStateStats \
      --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis --section SourceCounters "$plans" --shapes="$shape" \
      --plans=chosen --reps=4
    cp "$logs/ncu_$shape.log" "$OUT/ncu_$shape.txt"
  done
  finish
fi
stage build cmake --build "$build" -j "$jobs"
[ $status -eq 0 ] || finish

if [ "$what" != bench ]; then
  export OMP_PROC_BIND=false
  stage ctest ctest --test-dir "$build" --output-on-failure --timeout 1200 ${SOFTFUSE_CTEST_ARGS:-}
  grep -E "tests passed|tests failed|Failed|Skipped|\*\*\*" "$logs/ctest.log" | tee -a "$OUT/summary.txt"
fi

if [ "$what" != test ]; then
  clock_log bench_softmax "$build/perf/softfuse_bench_softmax" --benchmark_out="$OUT/bench_softmax.json" \
    --benchmark_out_format=json --benchmark_min_time=0.2
  grep -E "^(copy|softmax)" "$logs/bench_softmax.log" | sed 's/ bytes_per_second=[^ ]*//' | tee -a "$OUT/summary.txt"
  if [ -x "$build/perf/softfuse_bench_linear" ]; then
    stage bench_fused "$build/perf/softfuse_bench_linear" --benchmark_out="$OUT/bench_fused.json" \
      --benchmark_out_format=json
    grep -E "^[a-z]" "$logs/bench_fused.log" | grep -v "^Run\|^Load" | tee -a "$OUT/summary.txt"
  fi
  if [ -x "$build/perf/cuda_specialized/linear_kernels_bench" ]; then
    stage fused_kernels "$build/perf/cuda_specialized/linear_kernels_bench" --bench --json "$OUT/fused_kernels.json"
    grep -E "^bench" "$logs/fused_kernels.log" | grep -v lt_sweep | tee -a "$OUT/summary.txt"
    # the tf32 layers against cuBLAS alone at full clocks: 8 s idle before each of 5 rounds
    stage fused_full_clocks "$build/perf/cuda_specialized/linear_kernels_bench" --quick --rounds 5 --cool 8 \
      --json "$OUT/fused_full_clocks.json"
    grep -E "^bench" "$logs/fused_full_clocks.log" | tee -a "$OUT/summary.txt"
    stage torch_fused python3 perf/torch_baseline/linear_torch.py --json "$OUT/torch_fused.json"
    grep -E "^torch" "$logs/torch_fused.log" | tee -a "$OUT/summary.txt"
    stage plot_fused python3 perf/plot_linear.py "$OUT/fused_kernels.json" "$OUT/torch_fused.json" \
      -o "$OUT/fused_layers.png"
  fi
  if [ -f perf/torch_baseline/softmax_torch.py ]; then
    stage torch_softmax python3 perf/torch_baseline/softmax_torch.py --json "$OUT/torch_softmax.json"
    tail -n 12 "$logs/torch_softmax.log" | tee -a "$OUT/summary.txt"
  fi
fi
finish
