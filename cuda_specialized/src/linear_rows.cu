// The row part of the fused layers.
//
// After the GEMM has written the logits z into y (bias included for GELU), one block per row holds the row
// on chip (shared memory, and registers for the affine map): u = op(z) (GELU, or the BatchNorm + scale
// folded into a per-feature affine map by linear_batchnorm.cu), its maximum, exp(u - max) and their
// sum in double, then y = exp(u - max) / sum. y is read once and written once.
//
// The ops return u * log2(e) (folded into their constants, or into the map), so that the softmax takes
// exp2f: fewer instructions per element than expf, which multiplies by log2(e) itself. In the map the
// fold replaces the rounding of u by one of u * log2(e); in GELU it adds a rounding of z * log2(e) / 2.
// The workload's errors against fp64 were the same to three digits in every mode (H100,
// log added by commit 9c9cb34).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include <cuda_runtime.h>
#include <math_constants.h>

#include "linear_impl.hpp"
#include "runtime.hpp"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

namespace {

template <int V>
struct alignas(4 * V) Pack {
  float v[V];
};

// The elementwise ops apply to V consecutive features j0 .. j0 + V - 1 at once. Each names the row
// kernel's shape: threads per row, packs of the row each thread keeps in registers (the rest is in
// shared memory) and the blocks per multiprocessor the registers must allow.
//
// GELU: 256 threads and the row in shared memory (6 rows of 8192 floats per multiprocessor); erff
// makes the kernel partly compute-bound, and 128 threads with part of the row in registers (8 rows)
// measured slower: 26.0-26.6 us against 24.0-24.4 (H100, ncu in the layer, 1024 x 8192).
struct GeluShape {
  static constexpr int kThreads = 256, kRegPacks = 0, kMinBlocks = 1;
  static constexpr float kHalfLog2e = 0.72134752044448170368f;  // GELU's 1/2 times log2(e)
};

struct GeluExact : GeluShape {
  bool aligned() const { return true; }
  template <int V>
  __device__ void operator()(std::int64_t, Pack<V>& p) const {
#pragma unroll
    for (int e = 0; e < V; ++e) p.v[e] = kHalfLog2e * p.v[e] * (1.0f + erff(p.v[e] * 0.70710678118654752440f));
  }
};

struct GeluTanh : GeluShape {
  bool aligned() const { return true; }
  template <int V>
  __device__ void operator()(std::int64_t, Pack<V>& p) const {
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float z = p.v[e];
      p.v[e]        = kHalfLog2e * z * (1.0f + tanhf(0.79788456080286535588f * (z + 0.044715f * z * z * z)));
    }
  }
};

// Vector loads of the per-feature parameters: the launcher picks V = 4 only when they are
// 16-byte aligned too. 128 threads with 7 of each thread's 16 packs of an 8192-float row in
// registers (62-64 registers, no spills; 8 spill in the inference kernel) and 18 KB of shared
// memory: 8 rows per multiprocessor, so the 1024 rows of the workload are resident at once on 132
// multiprocessors, in 159 KB of shared memory, which leaves 92 KB of L1 (set_carveout) to the
// 64 KB map that all 8 blocks read. The whole row in shared memory (256 threads, 33 KB: 6 rows)
// left 232 rows to a second, latency-bound round: H100, ncu in the layer, 23.7-24.2 us against
// 20.2-20.4 us after the training statistics, 25.8-26.2 against 22.7-23.5 after the inference map
// (log added by commit 8d09dcd). 7 packs rather than 6 (20 KB, 171 KB for 8
// blocks: a 196 KB carveout and 60 KB of L1): tf32 training layer 1.094-1.097x the GEMM against
// 1.096-1.099x (log added by commit 9c9cb34).
struct FeatureAffine {
  static constexpr int kThreads = 128, kRegPacks = 7, kMinBlocks = 8;
  const float* __restrict__ mul;
  const float* __restrict__ shift;
  template <int V>
  __device__ void operator()(std::int64_t j0, Pack<V>& p) const {
    const Pack<V> m = *reinterpret_cast<const Pack<V>*>(mul + j0);
    const Pack<V> s = *reinterpret_cast<const Pack<V>*>(shift + j0);
#pragma unroll
    for (int e = 0; e < V; ++e) p.v[e] = fmaf(p.v[e], m.v[e], s.v[e]);
  }
  bool aligned() const {
    return ((reinterpret_cast<std::uintptr_t>(mul) | reinterpret_cast<std::uintptr_t>(shift)) & 15u) == 0;
  }
};

// A pack of the row, which the kernel reads once: a streaming load (evict first), which leaves the
// caches to the per-feature map (H100, tf32 layers at full clocks, interleaved with cuBLAS alone:
// BatchNorm inference 1.085-1.090x the GEMM against 1.091-1.093x with plain loads, training and
// GELU within noise; L2-only loads changed nothing; log added by commit 4d89287).
template <int V>
__device__ __forceinline__ Pack<V> load_once(const Pack<V>* p) {
  Pack<V> q;
  if constexpr (V == 4) {
    const float4 f = __ldcs(reinterpret_cast<const float4*>(p));
    q.v[0] = f.x, q.v[1] = f.y, q.v[2] = f.z, q.v[3] = f.w;
  } else {
    q.v[0] = __ldcs(p->v);
  }
  return q;
}

// Block-wide reduction through a warp butterfly and one shared slot per warp.
template <class T, class F>
__device__ T block_reduce(T v, F join, T* slots) {
  for (int o = 16; o > 0; o >>= 1) v = join(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  __syncthreads();  // the slots may still be read from a previous reduction
  if (lane == 0) slots[warp] = v;
  __syncthreads();
  T r = slots[0];
  for (int w = 1; w < warps; ++w) r = join(r, slots[w]);
  return r;
}

// One block of Op::kThreads per row: the first Op::kRegPacks packs of each thread (u, then
// exp(u - max)) in registers, the rest of the row in dynamic shared memory.
//
// On sm_90 the row kernel is a programmatic dependent launch of the kernel before it, so its blocks
// are scheduled while that kernel finishes; `griddepcontrol.wait` (a no-op otherwise) holds them
// until that kernel is complete. After the GEMM they wait before loading the logits. After the
// training statistics (LoadBeforeWait), which themselves waited for the GEMM before they let this
// kernel launch, the logits are final: the blocks load their row first and wait only before they
// apply the map that kernel writes (BatchNorm layers 0-1 % faster, interleaved A/B).
template <class Op, int V, bool LoadBeforeWait>
__global__ void __launch_bounds__(Op::kThreads, Op::kMinBlocks)
    fused_row_softmax_kernel(float* __restrict__ y, std::int64_t ldy, std::int64_t out, Op op) {
  extern __shared__ float4 smem4[];
  Pack<V>* row_s = reinterpret_cast<Pack<V>*>(smem4);  // pack i >= nreg at row_s[i - nreg]
  __shared__ double dslots[32];
  __shared__ float fslots[32];
  Pack<V>* row    = reinterpret_cast<Pack<V>*>(y + static_cast<std::int64_t>(blockIdx.x) * ldy);
  const int nvec  = static_cast<int>(out / V);
  constexpr int P = Op::kRegPacks;
  const int nreg  = P * static_cast<int>(blockDim.x);
  Pack<V> reg[P > 0 ? P : 1];

  // f(i, p) for each pack i of this thread, p its register or shared-memory storage
  const auto each_pack = [&](auto&& f) {
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      if (i < nvec) f(i, reg[k]);
    }
#pragma unroll 4
    for (int i = nreg + threadIdx.x; i < nvec; i += blockDim.x) f(i, row_s[i - nreg]);
  };

  float m          = -CUDART_INF_F;
  bool nan_seen    = false;
  const auto apply = [&](int i, Pack<V>& p) {
    op(static_cast<std::int64_t>(i) * V, p);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      nan_seen |= p.v[e] != p.v[e];
      m = fmaxf(m, p.v[e]);
    }
  };
  if constexpr (LoadBeforeWait) {
    each_pack([&](int i, Pack<V>& p) { p = load_once(row + i); });
    grid_dependency_wait();
    each_pack(apply);
  } else {
    grid_dependency_wait();
    each_pack([&](int i, Pack<V>& p) { apply(i, p = load_once(row + i)); });
  }
  // A NaN anywhere makes the row NaN, as +inf does: one reduction, with a NaN counted as +inf.
  const float big = block_reduce(
      nan_seen ? CUDART_INF_F : m, [](float a, float b) { return fmaxf(a, b); }, fslots);
  if (isinf(big)) {  // NaN or +inf in the row, or a row of -inf: a NaN row
    Pack<V> q;
#pragma unroll
    for (int e = 0; e < V; ++e) q.v[e] = CUDART_NAN_F;
    for (int i = threadIdx.x; i < nvec; i += blockDim.x) row[i] = q;
    return;
  }
  double s = 0;
  each_pack([&](int, Pack<V>& p) {
    float part = 0;
#pragma unroll
    for (int e = 0; e < V; ++e) {
      p.v[e] = exp2f(p.v[e] - big);
      part += p.v[e];
    }
    s += part;
  });
  const double sum = block_reduce(
      s, [](double a, double b) { return a + b; }, dslots);
  const float inv = static_cast<float>(1.0 / sum);
  each_pack([&](int i, const Pack<V>& p) {
    Pack<V> q = p;
#pragma unroll
    for (int e = 0; e < V; ++e) q.v[e] *= inv;
    row[i] = q;
  });
}

template <class Op, int V, bool LoadBeforeWait>
void launch_rows(int device, const LinearOperands& op, const Op& f, cudaStream_t stream) {
  void (*const kernel_fn)(float*, std::int64_t, std::int64_t, Op) = fused_row_softmax_kernel<Op, V, LoadBeforeWait>;
  const void* kernel                                              = reinterpret_cast<const void*>(kernel_fn);
  const std::int64_t nvec                                         = op.out / V;
  const int threads =
      static_cast<int>(std::min<std::int64_t>(Op::kThreads, std::max<std::int64_t>(32, (nvec + 31) / 32 * 32)));
  const std::int64_t smem =
      static_cast<std::int64_t>(sizeof(Pack<V>)) * std::max<std::int64_t>(0, nvec - Op::kRegPacks * threads);
  // Raises the kernel's shared-memory limit (once) and asks for the smallest carveout that keeps its
  // residency, leaving the rest to L1, where the per-feature map that every row block of a
  // multiprocessor reads stays. Without it the driver gave the BatchNorm row kernel no more L1 at
  // 159 KB of shared memory than at 171 KB (H100: equal layer times); with it the tf32 training
  // layer ran 0.3 % faster (log added by commit 9c9cb34).
  const DeviceInfo& di = device_info(device);
  set_carveout(di, kernel, max_active(di, kernel, threads, smem, 0) / di.sms, smem, false);
  cudaLaunchAttribute attr = dependent_launch_attribute();
  const bool dependent     = di.binary_version >= 90;
  for (std::int64_t r0 = 0; r0 < op.batch; r0 += 0x7fffffff) {  // grid.x limit
    cudaLaunchConfig_t cfg{};
    cfg.gridDim          = dim3(static_cast<unsigned>(std::min<std::int64_t>(op.batch - r0, 0x7fffffff)), 1, 1);
    cfg.blockDim         = dim3(static_cast<unsigned>(threads), 1, 1);
    cfg.dynamicSmemBytes = static_cast<std::size_t>(smem);
    cfg.stream           = stream;
    cfg.attrs            = &attr;
    cfg.numAttrs         = dependent && r0 == 0 ? 1 : 0;  // only the first launch follows the previous kernel
    check_linear(cudaLaunchKernelEx(&cfg, kernel_fn, op.y + r0 * op.ldy, op.ldy, op.out, f), "row kernel launch");
  }
}

template <class Op, bool LoadBeforeWait = false>
void row_softmax(int device, const LinearOperands& op, const Op& f, cudaStream_t stream) {
  const bool aligned = (reinterpret_cast<std::uintptr_t>(op.y) & 15u) == 0 && f.aligned();
  if (aligned && op.out % 4 == 0 && op.ldy % 4 == 0)
    launch_rows<Op, 4, LoadBeforeWait>(device, op, f, stream);
  else
    launch_rows<Op, 1, LoadBeforeWait>(device, op, f, stream);
}

}  // namespace

int row_smem_bytes(int device) { return std::max(0, device_info(device).smem_optin - 32 * (8 + 4) - 1024); }

void gelu_softmax_rows(int device, const LinearOperands& op, bool exact_gelu, cudaStream_t stream) {
  if (exact_gelu)
    row_softmax(device, op, GeluExact{}, stream);
  else
    row_softmax(device, op, GeluTanh{}, stream);
}

void affine_softmax_rows(int device, const LinearOperands& op, const float* ws, bool after_statistics,
                         cudaStream_t stream) {
  const FeatureAffine map{ws, ws + op.out};
  if (after_statistics)
    row_softmax<FeatureAffine, true>(device, op, map, stream);
  else
    row_softmax(device, op, map, stream);
}

}  // namespace impl

}  // namespace cuda_specialized
}  // namespace softfuse
