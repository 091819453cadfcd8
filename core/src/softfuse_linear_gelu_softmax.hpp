#ifndef SOFTFUSE_LINEAR_GELU_SOFTMAX_HPP
#define SOFTFUSE_LINEAR_GELU_SOFTMAX_HPP

/// \file
/// softfuse::linear_gelu_softmax — Linear -> GELU -> softmax over the features, fused after the GEMM.

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "softfuse_config.hpp"
#include "softfuse_implementation.hpp"
#include "softfuse_precision.hpp"
#include "impl/softfuse_dispatch.hpp"
#include "impl/softfuse_linear_checks.hpp"
#include "impl/softfuse_linear_gelu_softmax_portable.hpp"
#include "impl/softfuse_linear_spec.hpp"
#ifdef SOFTFUSE_HAVE_CUDA_SPECIALIZED
#include "cuda/softfuse_linear_cuda.hpp"
#endif

namespace softfuse {

/// The GELU of linear_gelu_softmax. Two different functions (they differ by up to about 5e-4):
///  - exact: 0.5 z (1 + erf(z / sqrt(2))), the reference framework's default;
///  - tanh:  0.5 z (1 + tanh(sqrt(2 / pi) (z + 0.044715 z^3))), its approximate='tanh' option.
enum class Gelu { exact, tanh };

namespace Impl {

// split, ld_split: a Tf32x3Weight's split (or nullptr) for Precision::tf32x3.
template <class ExecSpace, class XView, class WView, class BView, class YView>
Implementation linear_gelu_softmax_run(const ExecSpace& space, const XView& x, const WView& weight, const BView& bias,
                                       const YView& y, Gelu gelu, Implementation implementation, Precision precision,
                                       const float* split, std::int64_t ld_split) {
  constexpr const char* function = "softfuse::linear_gelu_softmax";
  SOFTFUSE_IMPL_CHECK_LINEAR_VIEWS("softfuse::linear_gelu_softmax", ExecSpace, XView, WView, BView, YView);
  require_linear_extents(function, x, weight, bias, y);

  return dispatch<LinearSpecialization<ExecSpace>>(
      function, implementation, [&](auto s) { return decltype(s)::applies_gelu(space, x, weight, bias, y); },
      [&](auto s) { decltype(s)::gelu(space, x, weight, bias, y, gelu == Gelu::exact, precision, split, ld_split); },
      [&] {
        const exec_view_t<ExecSpace, XView> xn        = x;
        const exec_view_t<ExecSpace, WView> wn        = weight;
        const exec_view_t<ExecSpace, BView> bn        = bias;
        const exec_view_t<ExecSpace, YView, false> yn = y;
        if (gelu == Gelu::exact)
          linear_gelu_softmax_portable<true>(space, xn, wn, bn, yn);
        else
          linear_gelu_softmax_portable<false>(space, xn, wn, bn, yn);
      });
}

}  // namespace Impl

/// y(i, :) = softmax(gelu(x(i, :) · weightᵀ + bias)) for every row i.
///
/// x [batch, in], weight [out, in] (the reference framework's storage), bias [out], y [batch, out]:
/// Views of float or double, one value type, any layout; y must not overlap the inputs.
///  - Kokkos::Cuda with float Views in CudaSpace, rows contiguous and out small enough for one block (57,728
///    on an H100): the CUDA specialization. The GEMM runs through cuBLASLt on space.cuda_stream() in
///    `precision`, with the bias in its epilogue, writing the logits into y; one row kernel finishes in place.
///  - Elsewhere the portable implementation: KokkosBlas::gemm (the BLAS / cuBLAS TPL for LayoutRight), then one
///    team-policy row pass; `precision` does not apply (the GEMM runs in the Views' type). With Kokkos
///    Kernels before 4.1, whose gemm takes no execution-space instance, it fences `space` before the GEMM and
///    the default instance after it.
/// No other [batch, out] memory is used; tf32x3 without a Tf32x3Weight splits the weight for the call
/// (2 * out * in floats) and always splits x (2 * batch * in floats), allocated on the stream.
/// Throws std::invalid_argument when the extents do not fit together, or for Implementation::specialized where
/// no specialization applies; std::runtime_error from the CUDA specialization when CUDA or cuBLASLt fails.
/// Returns the implementation that ran: Implementation::specialized or Implementation::portable.
template <class ExecSpace, class XView, class WView, class BView, class YView>
Implementation linear_gelu_softmax(const ExecSpace& space, const XView& x, const WView& weight, const BView& bias,
                                   const YView& y, Gelu gelu = Gelu::exact,
                                   Implementation implementation = Implementation::automatic,
                                   Precision precision           = Precision::fp32) {
  return Impl::linear_gelu_softmax_run(space, x, weight, bias, y, gelu, implementation, precision, nullptr, 0);
}

/// As above in Precision::tf32x3, with the weight's split made once (see Tf32x3Weight).
template <class ExecSpace, class XView, class WView, class BView, class YView>
Implementation linear_gelu_softmax(const ExecSpace& space, const XView& x, const Tf32x3Weight<WView>& weight,
                                   const BView& bias, const YView& y, Gelu gelu = Gelu::exact,
                                   Implementation implementation = Implementation::automatic) {
  const auto& split = weight.split();
  return Impl::linear_gelu_softmax_run(space, x, weight.weight(), bias, y, gelu, implementation, Precision::tf32x3,
                                       split.extent(0) ? split.data() : nullptr,
                                       static_cast<std::int64_t>(split.extent(1)));
}

/// As above, on a default-constructed instance of y's execution space.
template <class XView, class WView, class BView, class YView>
Implementation linear_gelu_softmax(const XView& x, const WView& weight, const BView& bias, const YView& y,
                                   Gelu gelu = Gelu::exact, Implementation implementation = Implementation::automatic,
                                   Precision precision = Precision::fp32) {
  static_assert(Kokkos::is_view<YView>::value, "softfuse::linear_gelu_softmax: y must be a Kokkos::View");
  return linear_gelu_softmax(typename YView::execution_space{}, x, weight, bias, y, gelu, implementation, precision);
}

}  // namespace softfuse

#endif
