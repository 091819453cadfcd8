#ifndef SOFTFUSE_IMPL_LINEAR_GELU_SOFTMAX_PORTABLE_HPP
#define SOFTFUSE_IMPL_LINEAR_GELU_SOFTMAX_PORTABLE_HPP

// The portable Linear -> GELU -> softmax: the GEMM writes the logits into y, then one row pass adds the
// bias, applies GELU and the softmax in place.

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "softfuse_gelu.hpp"
#include "softfuse_linear_gemm.hpp"
#include "softfuse_softmax_portable.hpp"

namespace softfuse {
namespace Impl {

template <class BView, bool Exact>
struct BiasGeluOp {
  BView bias;

  template <class T>
  KOKKOS_INLINE_FUNCTION T operator()(const std::int64_t j, const T z) const {
    const T v = z + bias(j);
    return Exact ? gelu_exact(v) : gelu_tanh(v);
  }
};

template <bool Exact, class ExecSpace, class XView, class WView, class BView, class YView>
void linear_gelu_softmax_portable(const ExecSpace& space, const XView& x, const WView& weight, const BView& bias,
                                  const YView& y) {
  linear_gemm(space, x, weight, y);
  // Rows cached wherever they fit: op (erf, BatchNorm) then runs once per element, not twice.
  row_softmax(space, y, y, BiasGeluOp<BView, Exact>{bias}, true, "softfuse::linear_gelu_softmax[portable]");
}

}  // namespace Impl
}  // namespace softfuse

#endif
