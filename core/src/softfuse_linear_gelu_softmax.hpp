#ifndef SOFTFUSE_LINEAR_GELU_SOFTMAX_HPP
#define SOFTFUSE_LINEAR_GELU_SOFTMAX_HPP

/// \file
/// softfuse::linear_gelu_softmax — Linear -> GELU -> softmax over the features, fused after the GEMM.

#include <Kokkos_Core.hpp>

#include <stdexcept>

#include "softfuse_implementation.hpp"
#include "impl/softfuse_linear_checks.hpp"
#include "impl/softfuse_linear_gelu_softmax_portable.hpp"

namespace softfuse {

/// The GELU of linear_gelu_softmax. Two different functions (they differ by up to about 5e-4):
///  - exact: 0.5 z (1 + erf(z / sqrt(2))), the reference framework's default;
///  - tanh:  0.5 z (1 + tanh(sqrt(2 / pi) (z + 0.044715 z^3))), its approximate='tanh' option.
enum class Gelu { exact, tanh };

/// y(i, :) = softmax(gelu(x(i, :) · weightᵀ + bias)) for every row i.
///
/// x [batch, in], weight [out, in] (the reference framework's storage), bias [out], y [batch, out]:
/// Views of float or double, one value type, any layout; LayoutRight throughout is the fast path (the GEMM
/// goes to the BLAS / cuBLAS TPL where Kokkos Kernels has one). The GEMM (KokkosBlas::gemm) writes the
/// logits into y, one row pass finishes in place: no other [batch, out] memory is used.
/// Asynchronous on `space`; with Kokkos Kernels before 4.1, whose gemm takes no execution-space instance,
/// the call fences `space` before the GEMM and the default instance after it.
/// Throws std::invalid_argument when the extents do not fit together, or for Implementation::specialized
/// (this operation has no backend specialization: it always runs the portable implementation).
template <class ExecSpace, class XView, class WView, class BView, class YView>
void linear_gelu_softmax(const ExecSpace& space, const XView& x, const WView& weight, const BView& bias,
                         const YView& y, Gelu gelu = Gelu::exact,
                         Implementation implementation = Implementation::automatic) {
  constexpr const char* function = "softfuse::linear_gelu_softmax";
  SOFTFUSE_IMPL_CHECK_LINEAR_VIEWS("softfuse::linear_gelu_softmax", ExecSpace, XView, WView, BView, YView);
  Impl::require_linear_extents(function, x, weight, bias, y);
  if (implementation == Implementation::specialized)
    throw std::invalid_argument(
        "softfuse::linear_gelu_softmax: Implementation::specialized requested, but this operation has no backend "
        "specialization");

  const Impl::exec_view_t<ExecSpace, XView> xn = x;
  const Impl::exec_view_t<ExecSpace, WView> wn = weight;
  const Impl::exec_view_t<ExecSpace, BView> bn = bias;
  const Impl::exec_view_t<ExecSpace, YView, false> yn = y;
  if (gelu == Gelu::exact)
    Impl::linear_gelu_softmax_portable<true>(space, xn, wn, bn, yn);
  else
    Impl::linear_gelu_softmax_portable<false>(space, xn, wn, bn, yn);
}

/// As above, on a default-constructed instance of y's execution space.
template <class XView, class WView, class BView, class YView>
void linear_gelu_softmax(const XView& x, const WView& weight, const BView& bias, const YView& y,
                         Gelu gelu = Gelu::exact, Implementation implementation = Implementation::automatic) {
  static_assert(Kokkos::is_view<YView>::value, "softfuse::linear_gelu_softmax: y must be a Kokkos::View");
  linear_gelu_softmax(typename YView::execution_space{}, x, weight, bias, y, gelu, implementation);
}

}  // namespace softfuse

#endif
