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
#include <cuda_runtime.h>

#include "linear_impl.hpp"
#include "softmax_plan.hpp"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

namespace {

// 32 features (a 128-byte row segment) per block and 512 threads: 256 blocks for 8192 features.
// H100, logits 1024 x 8192 (ncu, isolated): 16.4-17.9 us. Measured slower or no faster, isolated
// (perf/results/h100_fused_stats_variants_2026-11-22.txt, h100_fused_session4_2026-11-22.txt):
// 128 features per block (512-byte segments, 64 blocks) 17.4-22.3 us, and as clusters of 4 blocks
// over the rows (256 blocks, partial sums joined through DSMEM) 25.9-26.1 us; per-block staggered
// start rows 18.4-20.1 us; 8 or 16 rows per thread summed in float before the double 16.3-18.1 us.
constexpr int kStatFeatures = 32;
constexpr int kStatThreads = 512;

struct BatchNormParams {
  const float* bias;
  const float* gamma;
  const float* beta;
  const float* scale;
  std::int64_t scale_size;
  double eps;
  float* mul;  // [out] each
  float* shift;

  __device__ void store(std::int64_t j, double center, double var) const {
    const double s = 1.4426950408889634074 * scale[scale_size == 1 ? 0 : j];  // log2(e) scale
    const float m = static_cast<float>(s * gamma[j] / sqrt(var + eps));
    mul[j] = m;
    shift[j] = static_cast<float>(s * beta[j] - center * m);
  }
};

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
    for (int e = 0; e < V; ++e) shift[e] = z[j0 + e];
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
  const double n = static_cast<double>(rows), dm = sa / n;
  const double mean = static_cast<double>(z[j]) + dm;  // of the bias-free logits
  const double v = sb / n - dm * dm;
  const double var = v < 0 ? 0.0 : v;  // biased; rounding may leave it just below 0 (fmax would also turn NaN into 0)
  p.store(j, mean, var);
  running_mean[j] = static_cast<float>((1 - momentum) * running_mean[j] + momentum * (mean + p.bias[j]));
  running_var[j] = static_cast<float>((1 - momentum) * running_var[j] + momentum * var * n / (n - 1));
}

__global__ void batchnorm_inference_kernel(BatchNormParams p, const float* __restrict__ running_mean,
                                           const float* __restrict__ running_var, std::int64_t out) {
  const std::int64_t j = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  if (j < out) p.store(j, static_cast<double>(running_mean[j]) - p.bias[j], running_var[j]);
}

}  // namespace

void batchnorm_affine(int device, const LinearOperands& op, const BatchNormOperands& bn, float* ws,
                      cudaStream_t stream) {
  const BatchNormParams p{op.bias, bn.gamma, bn.beta, bn.scale, bn.scale_size, bn.eps, ws, ws + op.out};
  if (bn.training) {
    const unsigned blocks = static_cast<unsigned>((op.out + kStatFeatures - 1) / kStatFeatures);
    const bool vec = op.out % 4 == 0 && op.ldy % 4 == 0 && (reinterpret_cast<std::uintptr_t>(op.y) & 15u) == 0;
    cudaLaunchAttribute attr = dependent_launch_attribute();
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(kStatThreads);
    cfg.stream = stream;
    cfg.attrs = &attr;
    cfg.numAttrs = device_info(device).binary_version >= 90 ? 1 : 0;
    check_linear(cudaLaunchKernelEx(&cfg, vec ? batchnorm_training_kernel<4> : batchnorm_training_kernel<1>, op.y,
                                    op.ldy, op.batch, op.out, p, bn.running_mean, bn.running_var, bn.momentum),
                 "BatchNorm statistics launch");
  } else {
    const unsigned blocks = static_cast<unsigned>((op.out + 255) / 256);
    batchnorm_inference_kernel<<<blocks, 256, 0, stream>>>(p, bn.running_mean, bn.running_var, op.out);
  }
  check_linear(cudaGetLastError(), "BatchNorm kernel launch");
}

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse
