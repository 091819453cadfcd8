// Private: the pieces of the fused layers shared by the GEMM and the row kernels.
#ifndef SOFTFUSE_CUDA_SPECIALIZED_LINEAR_IMPL_HPP
#define SOFTFUSE_CUDA_SPECIALIZED_LINEAR_IMPL_HPP

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "runtime.hpp"
#include "softfuse/cuda_specialized/linear.hpp"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

// tf32x3: the longest K-slice of the high x high product. The tensor cores accumulate at most
// this many products before the fp32 epilogue adds the slice to y; the logits' error grows
// linearly with the slice (H100, the 1024 x 8192 x 8192 workload: 2.4e-6 at 1024 and 2.8e-6 at
// 1216 against SGEMM's 1.6e-6, 1.9e-5 unsliced), and each slice costs a read and a write of y.
// K is cut into the fewest slices of at most this length, evenly, each a multiple of 64 columns
// (256-byte-aligned operand offsets): 7 slices of <= 1216 for K = 8192.
constexpr std::int64_t kTf32x3MaxSlice = 1216;

// parts[r, 0:cols] and parts[r, cols:2*cols] = (high, low) TF32 parts of a[r, :] (3xTF32), or (low, high)
// if low_first.
void split(const float* a, std::int64_t lda, std::int64_t rows, std::int64_t cols, float* parts, std::int64_t ldp,
           bool low_first, cudaStream_t stream);

// y = x · weightᵀ + bias in op.precision (op.y receives the logits; op.bias may be null: no bias).
// tf32x3_max_slice: see kTf32x3MaxSlice (tf32x3 only; linear_kernels_bench sweeps it).
void linear_gemm(const LinearOperands& op, cudaStream_t stream, std::int64_t tf32x3_max_slice = kTf32x3MaxSlice);

// Writes the BatchNorm's per-feature affine map (scale folded in) into ws = [mul | shift]
// (2 * op.out floats): from the batch statistics of the bias-free logits in op.y, updating the
// running statistics, in training mode (on sm_90 a dependent launch of the GEMM that wrote them);
// from the running statistics otherwise.
void batchnorm_affine(int device, const LinearOperands& op, const BatchNormOperands& bn, float* ws,
                      cudaStream_t stream);

// Training mode where it applies (sm_90; out = 4096 or 8192; batch a multiple of 8 whose blocks of 8
// rows are resident at once, at least out / 128 of them; 16-byte aligned y, ldy and ws): the whole layer
// after the GEMM in one cooperative kernel that reads the logits once, writing the map into ws on the
// way. Returns false, having launched nothing, where it does not apply.
bool batchnorm_softmax_cooperative(int device, const LinearOperands& op, const BatchNormOperands& bn, float* ws,
                                   cudaStream_t stream);

// Dynamic shared memory a row kernel may use: the opt-in limit less the reductions' static slots.
int row_smem_bytes(int device);

// The row pass of linear_gelu_softmax, in place on the logits in op.y: GELU (exact or tanh), softmax.
void gelu_softmax_rows(int device, const LinearOperands& op, bool exact_gelu, cudaStream_t stream);

// The row pass of linear_batchnorm_softmax, in place on the logits in op.y: the affine map ws = [mul | shift]
// of batchnorm_affine, softmax. after_statistics: launched right after the training statistics (a dependent
// launch that loads its row before it waits for them).
void affine_softmax_rows(int device, const LinearOperands& op, const float* ws, bool after_statistics,
                         cudaStream_t stream);

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse

#endif
