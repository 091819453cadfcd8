#!/usr/bin/env bash
# Sets everything up on a fresh machine (dependencies into a cache, first time only), builds softfuse
# and runs the main job: the `softfuse` command-line program. With no arguments it runs the three
# reference workloads at full size on the best backend built, checked against a double reference.
#
#   bash scripts/run.sh [softfuse arguments…]      e.g. bash scripts/run.sh softmax --size 0.25
#
# SOFTFUSE_BACKEND=cuda (with SOFTFUSE_ARCH=HOPPER90|AMPERE80) builds for NVIDIA GPUs instead.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
backend=${SOFTFUSE_BACKEND:-openmp}
build=${SOFTFUSE_BUILD_DIR:-$root/build/$backend}
jobs=${SOFTFUSE_JOBS:-$(nproc)}

deps=$(bash "$root/scripts/bootstrap.sh" --backend "$backend" ${SOFTFUSE_ARCH:+--arch "$SOFTFUSE_ARCH"} | tail -n1)
cmake -S "$root" -B "$build" -C "$deps" -DCMAKE_BUILD_TYPE=Release -DSOFTFUSE_ENABLE_TESTS=OFF >&2
cmake --build "$build" -j "$jobs" --target softfuse_cli >&2
export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads}
exec "$build/examples/softfuse" "$@"
