#!/usr/bin/env bash
# Sets everything up on a fresh machine (dependencies into a cache, first time only), builds softfuse
# with the OpenMP and Serial backends, and runs the whole test suite.
#
#   bash scripts/test.sh [ctest arguments…]
#
# SOFTFUSE_BUILD_DIR overrides the build folder (default build/openmp). Where nvcc exists the
# hand-tuned CUDA kernels are compiled too, and then the CUDA backend's tests, benchmarks and programs on Kokkos' CUDA
# backend (build/cuda-compile, or SOFTFUSE_CUDA_BUILD_DIR; SOFTFUSE_ARCH=HOPPER90|AMPERE80), so that the code only
# GPUs instantiate compiles: nothing of it runs, there is no GPU here (scripts/gpu_run.sh). SOFTFUSE_CUDA_BUILD=OFF
# skips that build.
# Open MPI (Debian's libopenmpi-dev and openmpi-bin) is installed when missing, and the softfuse::distributed
# tests run under mpirun on 1 to 4 ranks; where NCCL's header and library exist (the CUDA toolkit ships them)
# its code paths are compiled too.
# Then the unit tests run again built with AddressSanitizer and UndefinedBehaviorSanitizer
# (-O1 -g, build/openmp-asan or SOFTFUSE_ASAN_BUILD_DIR; SOFTFUSE_SANITIZERS=OFF skips it).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SOFTFUSE_BUILD_DIR:-$root/build/openmp}
jobs=${SOFTFUSE_JOBS:-$(nproc)}

deps=$(bash "$root/scripts/bootstrap.sh" --backend openmp | tail -n1)
cuda_kernels=OFF
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then cuda_kernels=ON; fi

if ! command -v mpirun >/dev/null 2>&1 || ! command -v mpicxx >/dev/null 2>&1; then
  echo "test.sh: installing Open MPI (libopenmpi-dev, openmpi-bin)" >&2
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libopenmpi-dev openmpi-bin >/dev/null
fi
nccl=OFF
if [ -f /usr/local/cuda/include/nccl.h ] || [ -f /usr/include/nccl.h ]; then nccl=ON; fi

cmake -S "$root" -B "$build" -C "$deps" -DCMAKE_BUILD_TYPE=Release -DSOFTFUSE_CUDA_SPECIALIZED=$cuda_kernels \
  -DSOFTFUSE_ENABLE_MPI=ON -DSOFTFUSE_ENABLE_NCCL=$nccl
cmake --build "$build" -j "$jobs"
export OMP_PROC_BIND=${OMP_PROC_BIND:-false}
ctest --test-dir "$build" --output-on-failure "$@"

if [ $cuda_kernels = ON ] && [ "${SOFTFUSE_CUDA_BUILD:-ON}" != OFF ]; then
  cuda_deps=$(bash "$root/scripts/bootstrap.sh" --backend cuda ${SOFTFUSE_ARCH:+--arch "$SOFTFUSE_ARCH"} | tail -n1)
  cuda_build=${SOFTFUSE_CUDA_BUILD_DIR:-$root/build/cuda-compile}
  cmake -S "$root" -B "$cuda_build" -C "$cuda_deps" -DCMAKE_BUILD_TYPE=Release -DSOFTFUSE_ENABLE_MPI=ON \
    -DSOFTFUSE_ENABLE_NCCL=$nccl
  # what the CUDA backend adds: the host backends' tests and cuda_specialized/ were compiled above
  targets="softfuse_unit_cuda softfuse_distributed_cuda softfuse_bench_softmax softfuse_bench_portable_plans"
  targets+=" softfuse_bench_linear softfuse_cli softfuse_team_softmax_example"
  [ $nccl = OFF ] || targets+=" softfuse_distributed_cuda_nccl"
  cmake --build "$cuda_build" -j "$jobs" --target $targets
  echo "test.sh: the CUDA build compiles (its tests need a GPU: scripts/gpu_run.sh)"
fi

if [ "${SOFTFUSE_SANITIZERS:-ON}" != OFF ]; then
  asan=${SOFTFUSE_ASAN_BUILD_DIR:-$root/build/openmp-asan}
  cmake -S "$root" -B "$asan" -C "$deps" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
    -DSOFTFUSE_SANITIZE=address,undefined -DSOFTFUSE_CUDA_SPECIALIZED=OFF \
    -DSOFTFUSE_ENABLE_BENCHMARKS=OFF -DSOFTFUSE_ENABLE_EXAMPLES=OFF
  cmake --build "$asan" -j "$jobs"
  ctest --test-dir "$asan" --output-on-failure "$@"
fi
