#ifndef SOFTFUSE_IMPL_LINEAR_GEMM_HPP
#define SOFTFUSE_IMPL_LINEAR_GEMM_HPP

// The GEMM of the fused layers: y = x · weightᵀ (no bias) through KokkosBlas::gemm, so the vendor BLAS runs
// it where Kokkos Kernels was configured with the BLAS / cuBLAS TPL. Kokkos Kernels (3.4 as 4.x) takes the
// TPL path when x, weight and y share one layout (LayoutRight: the row-major call is issued as the transposed
// column-major one) on a host / CUDA memory space, as Views of Device<ExecSpace, MemorySpace>, which is what
// exec_view_t gives; other layouts run Kokkos Kernels' own (much slower) kernel. The call runs within the
// backend's GemmScope (softfuse_linear_spec.hpp; on Kokkos::Cuda the driver's default cache preference).

#include <KokkosBlas3_gemm.hpp>
#include <Kokkos_Core.hpp>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "softfuse_linear_spec.hpp"

namespace softfuse {
namespace Impl {

// Kokkos Kernels takes an execution-space instance from 4.1 on; 3.x runs gemm on the default instance.
template <class ExecSpace, class AView, class BView, class CView, class = void>
struct GemmTakesSpace : std::false_type {};
template <class ExecSpace, class AView, class BView, class CView>
struct GemmTakesSpace<ExecSpace, AView, BView, CView,
                      std::void_t<decltype(KokkosBlas::gemm(
                          std::declval<const ExecSpace&>(), "N", "T", std::declval<typename CView::const_value_type&>(),
                          std::declval<const AView&>(), std::declval<const BView&>(),
                          std::declval<typename CView::const_value_type&>(), std::declval<const CView&>()))>>
    : std::true_type {};

template <class YView>
struct ZeroFill {
  YView y;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i, const std::int64_t j) const { y(i, j) = 0; }
};

template <class ExecSpace, class XView, class WView, class YView>
void linear_gemm(const ExecSpace& space, const XView& x, const WView& weight, const YView& y) {
  using T = typename YView::non_const_value_type;
  if (y.extent(0) == 0 || y.extent(1) == 0) return;
  if (x.extent(1) == 0) {  // Kokkos Kernels 3.x returns without writing C when the inner extent is 0
    // (and Kokkos 3.4's deep_copy cannot fill a rank-2 LayoutStride View)
    using policy_type = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>;
    Kokkos::parallel_for("softfuse::linear[zero logits]",
                         policy_type(space, {0, 0}, {std::int64_t(y.extent(0)), std::int64_t(y.extent(1))}),
                         ZeroFill<YView>{y});
    return;
  }
  const typename GemmScope<ExecSpace>::type scope{};
  if constexpr (GemmTakesSpace<ExecSpace, XView, WView, YView>::value) {
    KokkosBlas::gemm(space, "N", "T", T(1), x, weight, T(0), y);
  } else {
    // The default instance must see what `space` wrote into x and weight, and `space` the GEMM's result.
    space.fence();
    KokkosBlas::gemm("N", "T", T(1), x, weight, T(0), y);
    ExecSpace().fence();
  }
}

}  // namespace Impl
}  // namespace softfuse

#endif
