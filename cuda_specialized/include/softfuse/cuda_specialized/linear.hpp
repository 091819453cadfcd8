// softfuse: hand-tuned CUDA fused layers behind a plain interface (no Kokkos).
//
//   Linear -> GELU -> softmax:                 y = softmax(gelu(x · weightᵀ + bias))
//   Linear -> BatchNorm1d -> scale -> softmax: y = softmax(scale * bn(x · weightᵀ + bias))
//
// fp32, row-major, device memory of the current device. The GEMM runs through cuBLASLt on the
// caller's stream and writes the logits into y (GELU: with the bias in its epilogue; BatchNorm:
// without, the bias going into the per-feature affine map, where it cancels or meets the running
// mean in double); one row kernel then applies GELU or BatchNorm and scale plus the softmax in
// place (one read and one write of y). Training-mode BatchNorm reads the logits once more for the
// per-feature batch statistics.
//
// Errors: std::invalid_argument for bad extents or leading dimensions; std::runtime_error carrying
// the CUDA or cuBLAS status (prefixed "softfuse::cuda_specialized::linear: ") when a query, an
// allocation, a cuBLASLt call or a launch fails.
#ifndef SOFTFUSE_CUDA_SPECIALIZED_LINEAR_HPP
#define SOFTFUSE_CUDA_SPECIALIZED_LINEAR_HPP

#include <cstdint>
#include <cuda_runtime_api.h>

namespace softfuse {
namespace cuda_specialized {

// How the GEMM runs.
//  fp32:   fp32 SGEMM on the CUDA cores (CUBLAS_COMPUTE_32F).
//  tf32:   TF32 tensor cores (inputs rounded to 10 mantissa bits: ~1e-4 relative error).
//  tf32x3: each operand split into a high and a low TF32 part; the two cross products run as one
//          tensor-core GEMM over a concatenated K, and the high x high product in K-slices whose
//          results are added in fp32 by the GEMM epilogue (beta = 1), which keeps the tensor
//          cores' own accumulation short. Needs the weight's split (split_weight_tf32x3).
enum class GemmPrecision { fp32, tf32, tf32x3 };

struct LinearOperands {
  const float* x;  // [batch, in], row pitch ldx >= in
  std::int64_t ldx;
  const float* weight;  // [out, in], row pitch ldw >= in (the reference framework's storage)
  std::int64_t ldw;
  const float* bias;  // [out], contiguous
  float* y;           // [batch, out], row pitch ldy >= out; must not overlap the inputs
  std::int64_t ldy;
  std::int64_t batch, in, out;
  GemmPrecision precision;
  // tf32x3 only: the weight's split from split_weight_tf32x3 ([out, 2 * in], pitch ld_split), or
  // nullptr to split the weight for this call only (2 * out * in floats, allocated and freed on the
  // stream). The operand x is split on every call into 2 * batch * in floats, likewise.
  const float* weight_split;
  std::int64_t ld_split;
};

struct BatchNormOperands {
  const float* gamma;   // [out]
  const float* beta;    // [out]
  float* running_mean;  // [out], updated in training mode
  float* running_var;   // [out], updated in training mode (unbiased batch variance)
  const float* scale;   // [1] or [out]
  std::int64_t scale_size;
  bool training;
  double eps, momentum;
  float* workspace;  // 2 * out floats, or nullptr (then allocated and freed on the stream)
};

// True when the fused kernels can run on `device` (as softmax_available). Never throws.
bool linear_available(int device);
// The largest `out` whose rows the fused row kernel holds on chip on `device`; longer rows are not
// handled here (0 when the device is unusable).
std::int64_t linear_max_out(int device);

// split[o, 0:in] = low parts, split[o, in:2*in] = high parts of weight[o, :] (TF32, round to
// nearest). 2 * out * in floats, pitch ld_split >= 2 * in. Asynchronous on `stream`.
void split_weight_tf32x3(const float* weight, std::int64_t ldw, std::int64_t out, std::int64_t in, float* split,
                         std::int64_t ld_split, cudaStream_t stream);

// From construction to destruction, the current device's cache preference is the driver's default
// (cudaFuncCachePreferNone); the caller's is restored after. Kernels without a preference of their own,
// cuBLAS's among them, take the device's; Kokkos' CUDA initialization (3.x) sets it to shared memory,
// under which the fp32 SGEMM of 1024 x 8192 x 8192 ran 10 % slower on the H100. The fused layers launch
// their GEMM in such a scope (so does softfuse's portable path on Kokkos::Cuda). Scopes of several host
// threads take turns (a mutex), so each restores what the one before it found. Throws std::runtime_error
// when the preference cannot be read or set.
class DefaultCachePreference {
 public:
  DefaultCachePreference();
  ~DefaultCachePreference();
  DefaultCachePreference(const DefaultCachePreference&)            = delete;
  DefaultCachePreference& operator=(const DefaultCachePreference&) = delete;

 private:
  cudaFuncCache saved_;
};

// Asynchronous on `stream`; batch, in, out >= 0 (in = 0 gives logits = bias).
void linear_gelu_softmax(const LinearOperands& op, bool exact_gelu, cudaStream_t stream);
// Training mode needs batch >= 2.
void linear_batchnorm_softmax(const LinearOperands& op, const BatchNormOperands& bn, cudaStream_t stream);

}  // namespace cuda_specialized
}  // namespace softfuse

#endif
