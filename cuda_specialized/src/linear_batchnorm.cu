// The BatchNorm part of Linear -> BatchNorm1d -> scale -> softmax: the per-feature affine map
// u = z * mul_j + shift_j (one fma) that the row kernel applies (workspace [mul | shift]), with z
// the logits *without* the bias and u in log2 units (the row kernel's softmax takes exp2):
// mul_j = log2(e) scale gamma_j / sqrt(var_j + eps) and
// shift_j = log2(e) scale beta_j - center_j * mul_j, where center_j is the batch mean of z in training
// mode (the bias cancels) and running_mean_j - bias_j in inference mode. shift_j is formed in
// double from the float mul_j the kernel multiplies by, so its one rounding is the only error the
// fold adds: eps |shift_j|, the size of u's own rounding, where z * mul_j and shift_j cancel. No
// float rounding of z + bias meets a cancellation (a bias of 1e3 against a spread of 1 would
// cost ~1e-4). Two vectors rather than [center | mul | add]: the row kernel reads them from L2
// once per row, as many bytes again as the row itself.
//
// Training mode takes the batch mean and biased variance of z in one read of the logits (sums of
// z - z(0, j) in double, so a large mean against a small spread does not cancel) and updates the
// running statistics (unbiased variance) on the device.
//
// Where the whole batch fits on chip (out = 4096 or 8192, 8 rows per multiprocessor), the training
// layer after the GEMM is instead one cooperative kernel that reads the logits once
// (batchnorm_softmax_cooperative, below).
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <math_constants.h>

#include "linear_impl.hpp"
#include "runtime.hpp"
#include "softmax_common.cuh"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

namespace {

// 32 features (a 128-byte row segment) per block and 512 threads: 256 blocks for 8192 features.
// H100, logits 1024 x 8192 (ncu, isolated): 16.4-17.9 us. Measured slower or no faster, isolated
// (logs added by commits f4edb47 and 8d09dcd; docs/fused_layers.md):
// 128 features per block (512-byte segments, 64 blocks) 17.4-22.3 us, and as clusters of 4 blocks
// over the rows (256 blocks, partial sums joined through DSMEM) 25.9-26.1 us; per-block staggered
// start rows 18.4-20.1 us; 8 or 16 rows per thread summed in float before the double 16.3-18.1 us.
constexpr int kStatFeatures = 32;
constexpr int kStatThreads  = 512;

struct BatchNormParams {
  const float* bias;
  const float* gamma;
  const float* beta;
  const float* scale;
  std::int64_t scale_size;
  double eps;
  float* mul;  // [out] each
  float* shift;

  __device__ float scale_of(std::int64_t j) const { return scale[scale_size == 1 ? 0 : j]; }
  __device__ void store(std::int64_t j, double center, double var, float g, float b, float sc) const {
    const double s = 1.4426950408889634074 * sc;  // log2(e) scale
    const float m  = static_cast<float>(s * g / sqrt(var + eps));
    mul[j]         = m;
    shift[j]       = static_cast<float>(s * b - center * m);
  }
  __device__ void store(std::int64_t j, double center, double var) const {
    store(j, center, var, gamma[j], beta[j], scale_of(j));
  }
};

// Training mode: the biased variance from sums of d = z - c over n rows (sa = sum d, sb = sum d^2),
// and the running statistics' update (unbiased variance, running mean with the bias).
__device__ __forceinline__ double batch_variance(double sa, double sb, double n) {
  const double dm = sa / n, v = sb / n - dm * dm;
  return v < 0 ? 0.0 : v;  // rounding may leave it just below 0 (fmax would also turn NaN into 0)
}
__device__ __forceinline__ float running_update(float old, double batch, double momentum) {
  return static_cast<float>((1 - momentum) * old + momentum * batch);
}
// The common shift c of a feature's deviations d = z - c: its logit in row 0 where that is finite, else 0
// (an infinite shift would turn every d, and so a mean of inf, into NaN).
__device__ __forceinline__ float stat_shift(float z0) { return isfinite(z0) ? z0 : 0.0f; }
__device__ __forceinline__ float4 stat_shift(float4 z0) {
  return make_float4(stat_shift(z0.x), stat_shift(z0.y), stat_shift(z0.z), stat_shift(z0.w));
}

// Block: kStatFeatures features j0 .. j0 + 31. Thread (f, slot) with f < kStatFeatures / V loads
// V consecutive features of rows slot, slot + kSlots, ... (V = 4: a warp reads four 128-byte row
// segments per load), then the slots are added up in shared memory, one thread per feature.
template <int V>
__global__ void __launch_bounds__(kStatThreads)
    batchnorm_training_kernel(const float* __restrict__ z, std::int64_t ldz, std::int64_t rows, std::int64_t out,
                              BatchNormParams p, float* running_mean, float* running_var, double momentum) {
  // A dependent launch of the GEMM (sm_90): wait for the logits. Only then let the row kernel be
  // scheduled, since it loads the logits before it waits for this kernel.
  grid_dependency_wait();
  allow_dependent_launch();
  constexpr int kLanes = kStatFeatures / V;
  constexpr int kSlots = kStatThreads / kLanes;
  __shared__ double s1[kSlots][kStatFeatures + 1];
  __shared__ double s2[kSlots][kStatFeatures + 1];
  const int f = threadIdx.x % kLanes, slot = threadIdx.x / kLanes;
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * kStatFeatures + f * V;
  double a[V] = {}, b[V] = {};
  if (j0 < out) {  // V = 4 only when out % 4 == 0: the whole pack is in range
    double shift[V];
#pragma unroll
    for (int e = 0; e < V; ++e) shift[e] = stat_shift(z[j0 + e]);
#pragma unroll 4
    for (std::int64_t i = slot; i < rows; i += kSlots) {
      float v[V];
      if constexpr (V == 4) {
        const float4 q = *reinterpret_cast<const float4*>(z + i * ldz + j0);
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
      } else {
        v[0] = z[i * ldz + j0];
      }
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const double d = static_cast<double>(v[e]) - shift[e];
        a[e] += d;
        b[e] += d * d;
      }
    }
  }
#pragma unroll
  for (int e = 0; e < V; ++e) {
    s1[slot][f * V + e] = a[e];
    s2[slot][f * V + e] = b[e];
  }
  __syncthreads();
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * kStatFeatures + threadIdx.x;
  if (threadIdx.x >= kStatFeatures || j >= out) return;
  double sa = 0, sb = 0;
  for (int s = 0; s < kSlots; ++s) {
    sa += s1[s][threadIdx.x];
    sb += s2[s][threadIdx.x];
  }
  const double n    = static_cast<double>(rows);
  const double mean = static_cast<double>(stat_shift(z[j])) + sa / n;  // of the bias-free logits
  const double var  = batch_variance(sa, sb, n);
  p.store(j, mean, var);
  running_mean[j] = running_update(running_mean[j], mean + p.bias[j], momentum);
  running_var[j]  = running_update(running_var[j], var * n / (n - 1), momentum);
}

__global__ void batchnorm_inference_kernel(BatchNormParams p, const float* __restrict__ running_mean,
                                           const float* __restrict__ running_var, std::int64_t out) {
  const std::int64_t j = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  if (j < out) p.store(j, static_cast<double>(running_mean[j]) - p.bias[j], running_var[j]);
}

// ---- The training layer after the GEMM in one cooperative kernel ----
//
// Block b holds rows [8b, 8b + 8) whole on chip (1024 threads; thread t owns the float4 packs
// t + c * 1024 of each row, c < P, so out = 4096 P), so the logits are read once:
//  1. load the rows; each thread sums d = z - z(0, j) and d^2 over the block's 8 rows for its 4 P
//     features, in float, and writes these partials over rows 4-5 of the block (read already;
//     row 0 of the batch, the shift, stays intact);
//  2. grid barrier; block b joins the partials of features [F b, F b + F) over all blocks in
//     double, writes their map into the workspace and updates their running statistics;
//  3. grid barrier; every block maps its rows, takes their maxima, exp2 and sums (block
//     reductions of 8 rows at once), and writes y, half of the rows at a time so that the first
//     half's stores drain during the second half's exp2.
// The two-kernel path reads the logits twice (statistics, then the row kernel); here the
// statistics need only the partials (2 x out floats per block, within y). H100, tf32 training
// layer at full clocks, interleaved: 1.092-1.096x the TF32 GEMM against 1.097-1.102x
// (docs/fused_layers.md). The float partials over 8 rows carry ~1e-7 of
// relative error into the double join (the workload's errors against fp64 are the two-kernel
// path's to three digits). As in PyTorch's CUDA BatchNorm, which accumulates fp32 inputs in fp32,
// squared deviations beyond ~1e19 overflow (the two-kernel path sums in double).
constexpr int kCoopThreads = 1024, kCoopRows = 8, kCoopRegPacks = 3, kCoopMaxF = 128;
constexpr int kCoopWarps = kCoopThreads / 32;

template <int P>
struct CoopSmem {
  float4 packs[kCoopRows * P - kCoopRegPacks][kCoopThreads];  // packs >= kCoopRegPacks of the thread
  double red[kCoopRows][kCoopWarps];
  double rowv[kCoopRows];
  double join[8][2][64];
  float prm[7][kCoopMaxF];  // gamma, beta, scale, bias, running mean, running variance, z(0, j)
};

// Joins v[k] (k < 8) over a warp in 9 shuffles: each step halves the values a lane keeps. Lane l ends
// with row ((l >> 4) & 1) * 4 + ((l >> 3) & 1) * 2 + ((l >> 2) & 1)'s result.
template <class T, class F>
__device__ __forceinline__ T warp_join8(const T (&v)[8], F join, int lane) {
  T w4[4], w2[2];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const bool hi = lane & 16;
    w4[e]         = join(hi ? v[e + 4] : v[e], __shfl_xor_sync(0xffffffffu, hi ? v[e] : v[e + 4], 16));
  }
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const bool hi = lane & 8;
    w2[e]         = join(hi ? w4[e + 2] : w4[e], __shfl_xor_sync(0xffffffffu, hi ? w4[e] : w4[e + 2], 8));
  }
  const bool hi = lane & 4;
  T w           = join(hi ? w2[1] : w2[0], __shfl_xor_sync(0xffffffffu, hi ? w2[0] : w2[1], 4));
  w             = join(w, __shfl_xor_sync(0xffffffffu, w, 2));
  return join(w, __shfl_xor_sync(0xffffffffu, w, 1));
}

// v[k] joined over the block (the warps' results in double) into rowv[k].
template <class T, class F, class Smem>
__device__ void block_join8(const T (&v)[8], F join, Smem& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const T w = warp_join8(v, join, lane);
  if ((lane & 3) == 0) sm.red[((lane >> 4) & 1) * 4 + ((lane >> 3) & 1) * 2 + ((lane >> 2) & 1)][warp] = w;
  __syncthreads();
  if (warp < kCoopRows) {
    double x = sm.red[warp][lane];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x = join(x, __shfl_xor_sync(0xffffffffu, x, o));
    if (lane == 0) sm.rowv[warp] = x;
  }
  __syncthreads();
}

template <int P>
__global__ void __launch_bounds__(kCoopThreads, 1)
    batchnorm_softmax_cooperative_kernel(float* __restrict__ y, std::int64_t ldy, std::int64_t rows, BatchNormParams p,
                                         float* running_mean, float* running_var, double momentum) {
  constexpr int kPacks = kCoopRows * P, kOut = 4096 * P;
  extern __shared__ float4 smem4[];
  CoopSmem<P>& sm       = *reinterpret_cast<CoopSmem<P>*>(smem4);
  const int t           = threadIdx.x;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.x) * kCoopRows;
  const std::int64_t F  = (kOut + gridDim.x - 1) / gridDim.x;  // features joined per block, <= kCoopMaxF
  grid_dependency_wait();                                      // a dependent launch of the GEMM

  // 1. Pack n of the thread: row n / P, float4 t + (n % P) * kCoopThreads.
  const auto at = [&](int n) { return y + (r0 + n / P) * ldy + 4 * (t + (n % P) * kCoopThreads); };
  float4 z0[P];
#pragma unroll
  for (int c = 0; c < P; ++c) z0[c] = stat_shift(*reinterpret_cast<const float4*>(y + 4 * (t + c * kCoopThreads)));
  float4 reg[kCoopRegPacks];
#pragma unroll
  for (int n = 0; n < kCoopRegPacks; ++n) reg[n] = __ldcs(reinterpret_cast<const float4*>(at(n)));
#pragma unroll
  for (int n = kCoopRegPacks; n < kPacks; ++n) cp_async<16>(&sm.packs[n - kCoopRegPacks][t], at(n));
  cp_async_commit();
  if (t < F) {  // the parameters of the features this block joins, while the rows load
    const std::int64_t j = blockIdx.x * F + t;
    if (j < kOut) {
      sm.prm[0][t] = p.gamma[j];
      sm.prm[1][t] = p.beta[j];
      sm.prm[2][t] = p.scale_of(j);
      sm.prm[3][t] = p.bias[j];
      sm.prm[4][t] = running_mean[j];
      sm.prm[5][t] = running_var[j];
      sm.prm[6][t] = stat_shift(y[j]);
    }
  }
  const auto pack = [&](int n) -> float4& { return n < kCoopRegPacks ? reg[n] : sm.packs[n - kCoopRegPacks][t]; };
  cp_async_wait<0>();
  __syncthreads();  // the block's rows are all on chip before rows 4-5 take the partials
  // Partial of stat st (sum d, sum d^2) for features 4 (t + c 1024) .. + 3: the float4 at index
  // ((st P + c) 1024 + t) 4 of rows 4-5, so that each warp's store writes 512 contiguous bytes.
#pragma unroll
  for (int c = 0; c < P; ++c) {
    float a[4] = {}, b[4] = {};
#pragma unroll
    for (int k = 0; k < kCoopRows; ++k) {
      const float4 q   = pack(k * P + c);
      const float v[4] = {q.x, q.y, q.z, q.w}, s[4] = {z0[c].x, z0[c].y, z0[c].z, z0[c].w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float d = v[e] - s[e];
        a[e] += d;
        b[e] = fmaf(d, d, b[e]);
      }
    }
#pragma unroll
    for (int st = 0; st < 2; ++st) {
      const int idx    = ((st * P + c) * kCoopThreads + t) * 4;
      const float* src = st == 0 ? a : b;
      *reinterpret_cast<float4*>(y + (r0 + 4 + idx / kOut) * ldy + idx % kOut) =
          make_float4(src[0], src[1], src[2], src[3]);
    }
  }
  namespace cg = cooperative_groups;
  cg::this_grid().sync();

  // 2. Thread (g, st, f) adds stat st of feature F b + base + f over blocks g, g + 8, ...; then the 8
  // groups in shared memory.
  const int G = static_cast<int>(gridDim.x), f = t & 63, st = (t >> 6) & 1, g = t >> 7;
  for (std::int64_t base = 0; base < F; base += 64) {
    const std::int64_t jf = base + f, j = blockIdx.x * F + jf;
    double acc = 0;
    if (jf < F && j < kOut) {
      const int idx = ((st * P + static_cast<int>(j / (4 * kCoopThreads))) * kCoopThreads +
                       static_cast<int>((j / 4) % kCoopThreads)) *
                          4 +
                      static_cast<int>(j % 4);
      const float* src        = y + (g * kCoopRows + 4 + idx / kOut) * ldy + idx % kOut;
      const std::int64_t step = 8 * kCoopRows * ldy;  // 8 blocks on
      int q                   = g;
      for (; q + 56 < G; q += 64, src += 8 * step) {  // 8 loads in flight
        float v[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) v[u] = __ldcg(src + u * step);
#pragma unroll
        for (int u = 0; u < 8; ++u) acc += v[u];
      }
      for (; q < G; q += 8, src += step) acc += __ldcg(src);
    }
    sm.join[g][st][f] = acc;
    __syncthreads();
    if (t < 64 && jf < F && j < kOut) {
      double sa = 0, sb = 0;
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        sa += sm.join[k][0][t];
        sb += sm.join[k][1][t];
      }
      const double n = static_cast<double>(rows), mean = sm.prm[6][jf] + sa / n, var = batch_variance(sa, sb, n);
      p.store(j, mean, var, sm.prm[0][jf], sm.prm[1][jf], sm.prm[2][jf]);
      running_mean[j] = running_update(sm.prm[4][jf], mean + sm.prm[3][jf], momentum);
      running_var[j]  = running_update(sm.prm[5][jf], var * n / (n - 1), momentum);
    }
    __syncthreads();  // join is reused
  }
  cg::this_grid().sync();

  // 3. u = z mul + shift; a NaN anywhere makes the row NaN, as +inf does: its maximum counts as +inf.
  float mx[kCoopRows];
  {
    float4 mul[P], shift[P];
#pragma unroll
    for (int c = 0; c < P; ++c) {
      mul[c]   = __ldcg(reinterpret_cast<const float4*>(p.mul) + t + c * kCoopThreads);
      shift[c] = __ldcg(reinterpret_cast<const float4*>(p.shift) + t + c * kCoopThreads);
    }
#pragma unroll
    for (int k = 0; k < kCoopRows; ++k) {
      float m       = -CUDART_INF_F;
      bool nan_seen = false;
#pragma unroll
      for (int c = 0; c < P; ++c) {
        float4& q = pack(k * P + c);
        q         = make_float4(fmaf(q.x, mul[c].x, shift[c].x), fmaf(q.y, mul[c].y, shift[c].y),
                                fmaf(q.z, mul[c].z, shift[c].z), fmaf(q.w, mul[c].w, shift[c].w));
        nan_seen |= q.x != q.x || q.y != q.y || q.z != q.z || q.w != q.w;
        m = fmaxf(m, fmaxf(fmaxf(q.x, q.y), fmaxf(q.z, q.w)));
      }
      mx[k] = nan_seen ? CUDART_INF_F : m;
    }
  }
  block_join8(
      mx, [](auto a, auto b) { return a > b ? a : b; }, sm);
#pragma unroll
  for (int k = 0; k < kCoopRows; ++k) mx[k] = static_cast<float>(sm.rowv[k]);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    constexpr int kHalf = kCoopRows / 2;
    float sum[kCoopRows];
#pragma unroll
    for (int k = 0; k < kCoopRows; ++k) {
      sum[k] = 0;
      if (k / kHalf != h) continue;
#pragma unroll
      for (int c = 0; c < P; ++c) {
        float4& q = pack(k * P + c);
        q         = make_float4(exp2f(q.x - mx[k]), exp2f(q.y - mx[k]), exp2f(q.z - mx[k]), exp2f(q.w - mx[k]));
        sum[k] += (q.x + q.y) + (q.z + q.w);
      }
    }
    block_join8(
        sum, [](auto a, auto b) { return a + b; }, sm);
#pragma unroll
    for (int k = 0; k < kCoopRows; ++k) {
      if (k / kHalf != h) continue;
      // NaN or +inf in the row (maximum +inf), or a row of -inf: a NaN row
      const float inv = isinf(mx[k]) ? CUDART_NAN_F : static_cast<float>(1.0 / sm.rowv[k]);
#pragma unroll
      for (int c = 0; c < P; ++c) {
        const float4 q = pack(k * P + c);
        const float4 o =
            isinf(mx[k]) ? make_float4(inv, inv, inv, inv) : make_float4(q.x * inv, q.y * inv, q.z * inv, q.w * inv);
        *(reinterpret_cast<float4*>(y + (r0 + k) * ldy) + t + c * kCoopThreads) = o;
      }
    }
  }
}

template <int P>
bool launch_cooperative(const DeviceInfo& di, const LinearOperands& op, const BatchNormOperands& bn,
                        const BatchNormParams& p, cudaStream_t stream) {
  void (*const kernel_fn)(float*, std::int64_t, std::int64_t, BatchNormParams, float*, float*, double) =
      batchnorm_softmax_cooperative_kernel<P>;
  const void* kernel        = reinterpret_cast<const void*>(kernel_fn);
  const std::int64_t blocks = op.batch / kCoopRows, smem = sizeof(CoopSmem<P>);
  if (op.batch % kCoopRows != 0 || blocks * kCoopMaxF < op.out ||
      blocks > max_active(di, kernel, kCoopThreads, smem, 0))
    return false;
  set_carveout(di, kernel, 1, smem, false);
  cudaLaunchAttribute attrs[2] = {dependent_launch_attribute(), {}};
  attrs[1].id                  = cudaLaunchAttributeCooperative;
  attrs[1].val.cooperative     = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim          = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim         = dim3(kCoopThreads);
  cfg.dynamicSmemBytes = static_cast<std::size_t>(smem);
  cfg.stream           = stream;
  cfg.attrs            = attrs;
  cfg.numAttrs         = 2;
  check_linear(
      cudaLaunchKernelEx(&cfg, kernel_fn, op.y, op.ldy, op.batch, p, bn.running_mean, bn.running_var, bn.momentum),
      "cooperative BatchNorm softmax launch");
  return true;
}

}  // namespace

void batchnorm_affine(int device, const LinearOperands& op, const BatchNormOperands& bn, float* ws,
                      cudaStream_t stream) {
  const BatchNormParams p{op.bias, bn.gamma, bn.beta, bn.scale, bn.scale_size, bn.eps, ws, ws + op.out};
  if (bn.training) {
    const unsigned blocks = static_cast<unsigned>((op.out + kStatFeatures - 1) / kStatFeatures);
    const bool vec        = op.out % 4 == 0 && op.ldy % 4 == 0 && (reinterpret_cast<std::uintptr_t>(op.y) & 15u) == 0;
    cudaLaunchAttribute attr = dependent_launch_attribute();
    cudaLaunchConfig_t cfg{};
    cfg.gridDim  = dim3(blocks);
    cfg.blockDim = dim3(kStatThreads);
    cfg.stream   = stream;
    cfg.attrs    = &attr;
    cfg.numAttrs = device_info(device).binary_version >= 90 ? 1 : 0;
    check_linear(cudaLaunchKernelEx(&cfg, vec ? batchnorm_training_kernel<4> : batchnorm_training_kernel<1>, op.y,
                                    op.ldy, op.batch, op.out, p, bn.running_mean, bn.running_var, bn.momentum),
                 "BatchNorm statistics launch");
  } else {
    const cudaLaunchConfig_t cfg = plain_launch(dim3(static_cast<unsigned>((op.out + 255) / 256)), 256, stream);
    check_linear(cudaLaunchKernelEx(&cfg, batchnorm_inference_kernel, p, bn.running_mean, bn.running_var, op.out),
                 "BatchNorm map launch");
  }
}

bool batchnorm_softmax_cooperative(int device, const LinearOperands& op, const BatchNormOperands& bn, float* ws,
                                   cudaStream_t stream) {
  const DeviceInfo& di  = device_info(device);
  const auto misaligned = [](const void* q) { return (reinterpret_cast<std::uintptr_t>(q) & 15u) != 0; };
  // Measured on the H100 only (sm_90: also the dependent launch); 16-byte rows and map.
  if (!bn.training || di.binary_version < 90 || !di.cooperative || op.ldy % 4 != 0 || misaligned(op.y) ||
      misaligned(ws))
    return false;
  const BatchNormParams p{op.bias, bn.gamma, bn.beta, bn.scale, bn.scale_size, bn.eps, ws, ws + op.out};
  if (op.out == 8192) return launch_cooperative<2>(di, op, bn, p, stream);
  if (op.out == 4096) return launch_cooperative<1>(di, op, bn, p, stream);
  return false;
}

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse
