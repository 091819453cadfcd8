#ifndef SOFTFUSE_IMPL_LINEAR_CHECKS_HPP
#define SOFTFUSE_IMPL_LINEAR_CHECKS_HPP

// Argument checks of the Linear part shared by the fused layers: x [batch, in], weight [out, in],
// bias [out], y [batch, out], one value type throughout.

#include <type_traits>

#include "softfuse_view_checks.hpp"

// VIEW: as SOFTFUSE_IMPL_CHECK_VIEW, with the value type of REF.
#define SOFTFUSE_IMPL_CHECK_INPUT_VIEW(FUNCTION, SPACE, VIEW, NAME, RANK, REF)                                \
  SOFTFUSE_IMPL_CHECK_VIEW(FUNCTION, SPACE, VIEW, NAME, RANK);                                                \
  static_assert(std::is_same<typename VIEW::non_const_value_type, typename REF::non_const_value_type>::value, \
                FUNCTION ": " NAME " must have the value type of x")

#define SOFTFUSE_IMPL_CHECK_LINEAR_VIEWS(FUNCTION, SPACE, XVIEW, WVIEW, BVIEW, YVIEW) \
  SOFTFUSE_IMPL_CHECK_SPACE(FUNCTION, SPACE);                                         \
  SOFTFUSE_IMPL_CHECK_VIEW(FUNCTION, SPACE, XVIEW, "x", 2);                           \
  SOFTFUSE_IMPL_CHECK_INPUT_VIEW(FUNCTION, SPACE, WVIEW, "weight", 2, XVIEW);         \
  SOFTFUSE_IMPL_CHECK_INPUT_VIEW(FUNCTION, SPACE, BVIEW, "bias", 1, XVIEW);           \
  SOFTFUSE_IMPL_CHECK_OUTPUT_VIEW(FUNCTION, SPACE, YVIEW, "y", 2, XVIEW)

namespace softfuse {
namespace Impl {

template <class XView, class WView, class BView, class YView>
void require_linear_extents(const char* function, const XView& x, const WView& weight, const BView& bias,
                            const YView& y) {
  require_extents(weight.extent(1) == x.extent(1), function, "weight must be [out, in] with in = x.extent(1)", "x", x,
                  "weight", weight);
  require_extents(bias.extent(0) == weight.extent(0), function, "bias must have out = weight.extent(0) elements",
                  "bias", bias, "weight", weight);
  require_extents(y.extent(0) == x.extent(0), function, "y must have x's rows", "x", x, "y", y);
  require_extents(y.extent(1) == weight.extent(0), function, "y must be [batch, out] with out = weight.extent(0)",
                  "weight", weight, "y", y);
}

/// Unmanaged View of `View`'s data, normalized as Normalized<View, Const> does, whose kernels (Kokkos Kernels'
/// included) run on ExecSpace rather than on the memory space's default execution space.
template <class ExecSpace, class View, bool Const = true>
using exec_view_t =
    Kokkos::View<typename Normalized<View, Const>::type::data_type, typename Normalized<View, Const>::layout,
                 Kokkos::Device<ExecSpace, typename View::memory_space>, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

}  // namespace Impl
}  // namespace softfuse

#endif
