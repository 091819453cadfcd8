// The entry points of include/softfuse/cuda_specialized/linear.hpp: argument checks, then the GEMM
// (linear_gemm.cu), the BatchNorm statistics or map (linear_batchnorm.cu) and the row pass (linear_rows.cu).
#include <cstdint>
#include <memory>
#include <string>

#include <cuda_runtime.h>

#include "linear_impl.hpp"
#include "runtime.hpp"
#include "softfuse/cuda_specialized/linear.hpp"
#include "softfuse/cuda_specialized/softmax.hpp"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

namespace {

std::string extents(const LinearOperands& op) {
  return "batch " + std::to_string(op.batch) + ", in " + std::to_string(op.in) + ", out " + std::to_string(op.out) +
         ", ldx " + std::to_string(op.ldx) + ", ldw " + std::to_string(op.ldw) + ", ldy " + std::to_string(op.ldy);
}

// Checks the operands; returns the current device, or -1 when there is nothing to do.
int prepare(const LinearOperands& op, const char* function) {
  const std::string f = std::string(function) + ": ";
  if (op.batch < 0 || op.in < 0 || op.out < 0) throw_linear_invalid(f + "negative extent (" + extents(op) + ")");
  if (op.ldx < op.in || op.ldw < op.in || op.ldy < op.out)
    throw_linear_invalid(f + "leading dimensions must be >= the row lengths (" + extents(op) + ")");
  if (op.precision == GemmPrecision::tf32x3 && op.weight_split != nullptr && op.ld_split < 2 * op.in)
    throw_linear_invalid(f + "ld_split must be >= 2 * in (" + extents(op) + ", ld_split " +
                         std::to_string(op.ld_split) + ")");
  if (op.batch == 0 || op.out == 0) return -1;
  if (op.y == nullptr || op.bias == nullptr || (op.in > 0 && (op.x == nullptr || op.weight == nullptr)))
    throw_linear_invalid(f + "null pointer for a non-empty operand (" + extents(op) + ")");
  int device = 0;
  check_linear(cudaGetDevice(&device), "cudaGetDevice");
  if (!linear_available(device))
    throw_linear_cuda(cudaErrorNoKernelImageForDevice, "no usable kernel image for the current device");
  if (op.out > linear_max_out(device))
    throw_linear_invalid(f + "out = " + std::to_string(op.out) + " exceeds what one block holds on this device (" +
                         std::to_string(linear_max_out(device)) + ")");
  return device;
}

}  // namespace

}  // namespace impl

bool linear_available(int device) { return softmax_available(device); }

std::int64_t linear_max_out(int device) {
  if (!linear_available(device)) return 0;
  return impl::row_smem_bytes(device) / static_cast<int>(sizeof(float)) / 4 * 4;
}

void linear_gelu_softmax(const LinearOperands& op, bool exact_gelu, cudaStream_t stream) {
  const int device = impl::prepare(op, "linear_gelu_softmax");
  if (device < 0) return;
  impl::linear_gemm(op, stream);
  impl::gelu_softmax_rows(device, op, exact_gelu, stream);
}

void linear_batchnorm_softmax(const LinearOperands& op, const BatchNormOperands& bn, cudaStream_t stream) {
  const int device = impl::prepare(op, "linear_batchnorm_softmax");
  if (bn.training && op.batch == 1)
    impl::throw_linear_invalid("linear_batchnorm_softmax: training mode needs more than one row (batch 1)");
  if (bn.scale_size != 1 && bn.scale_size != op.out)
    impl::throw_linear_invalid("linear_batchnorm_softmax: scale must have 1 or out = " + std::to_string(op.out) +
                               " elements, not " + std::to_string(bn.scale_size));
  if (device < 0) return;
  if (!bn.gamma || !bn.beta || !bn.running_mean || !bn.running_var || !bn.scale)
    impl::throw_linear_invalid("linear_batchnorm_softmax: null BatchNorm parameter");
  std::unique_ptr<impl::StreamBuffer> own;
  float* ws = bn.workspace;
  if (ws == nullptr) {
    own = std::make_unique<impl::StreamBuffer>(2 * sizeof(float) * op.out, stream, "BatchNorm workspace");
    ws  = own->data();
  }
  LinearOperands logits = op;  // the bias goes into the BatchNorm's affine map instead
  logits.bias           = nullptr;
  if (bn.training) {
    impl::linear_gemm(logits, stream);
    if (!impl::batchnorm_softmax_cooperative(device, op, bn, ws, stream)) {
      impl::batchnorm_affine(device, op, bn, ws, stream);  // statistics of the logits
      impl::affine_softmax_rows(device, op, ws, true, stream);
    }
  } else {
    impl::batchnorm_affine(device, op, bn, ws, stream);  // from the running statistics: before the GEMM
    impl::linear_gemm(logits, stream);
    impl::affine_softmax_rows(device, op, ws, false, stream);
  }
}

void split_weight_tf32x3(const float* weight, std::int64_t ldw, std::int64_t out, std::int64_t in, float* split,
                         std::int64_t ld_split, cudaStream_t stream) {
  if (out < 0 || in < 0 || ldw < in || ld_split < 2 * in)
    impl::throw_linear_invalid("split_weight_tf32x3: need out, in >= 0, ldw >= in and ld_split >= 2 * in (out " +
                               std::to_string(out) + ", in " + std::to_string(in) + ", ldw " + std::to_string(ldw) +
                               ", ld_split " + std::to_string(ld_split) + ")");
  if (out > 0 && in > 0 && (weight == nullptr || split == nullptr))
    impl::throw_linear_invalid("split_weight_tf32x3: null pointer for a non-empty weight");
  impl::split(weight, ldw, out, in, split, ld_split, true, stream);
}

}  // namespace cuda_specialized
}  // namespace softfuse
