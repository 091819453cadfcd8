#ifndef SOFTFUSE_SOFTMAX_HPP
#define SOFTFUSE_SOFTMAX_HPP

/// \file
/// softfuse::softmax — row-wise softmax over the last dimension of a rank-2 View.

#include <Kokkos_Core.hpp>

#include "softfuse_config.hpp"
#include "softfuse_implementation.hpp"
#include "impl/softfuse_dispatch.hpp"
#include "impl/softfuse_softmax_portable.hpp"
#include "impl/softfuse_softmax_spec.hpp"
#include "impl/softfuse_view_checks.hpp"
#ifdef SOFTFUSE_HAVE_CUDA_SPECIALIZED
#include "cuda/softfuse_softmax_cuda.hpp"
#endif

namespace softfuse {

/// y(i, j) = exp(x(i, j) - max_j x(i, :)) / sum_j exp(x(i, j) - max_j x(i, :)), for every row i.
///
/// x and y: rank-2 Views of float or double, same extents, any layout; y may be x (in place).
/// Asynchronous on `space`. Semantics of the reference framework: a row holding NaN or +inf, and a
/// row of all -inf, comes out as NaN; huge finite values do not overflow.
/// Throws std::invalid_argument when the extents differ, or when `implementation` is
/// Implementation::specialized and no backend specialization applies to these Views.
/// Returns the implementation that ran: Implementation::specialized or Implementation::portable.
template <class ExecSpace, class XView, class YView>
Implementation softmax(const ExecSpace& space, const XView& x, const YView& y,
                       Implementation implementation = Implementation::automatic) {
  SOFTFUSE_IMPL_CHECK_SPACE("softfuse::softmax", ExecSpace);
  SOFTFUSE_IMPL_CHECK_VIEW("softfuse::softmax", ExecSpace, XView, "x", 2);
  SOFTFUSE_IMPL_CHECK_OUTPUT_VIEW("softfuse::softmax", ExecSpace, YView, "y", 2, XView);
  Impl::require_extents(x.extent(0) == y.extent(0) && x.extent(1) == y.extent(1), "softfuse::softmax",
                        "x and y must have the same extents", "x", x, "y", y);

  using XN             = Impl::const_view_t<XView>;
  using YN             = Impl::view_t<YView>;
  using Specialization = Impl::SoftmaxSpecialization<ExecSpace, XN, YN>;
  const XN xn          = x;
  const YN yn          = y;

  return Impl::dispatch<Specialization>(
      "softfuse::softmax", implementation, [&](auto s) { return decltype(s)::applies(space, xn, yn); },
      [&](auto s) { decltype(s)::run(space, xn, yn); }, [&] { Impl::softmax_portable(space, xn, yn); });
}

/// As above, on a default-constructed instance of y's execution space.
template <class XView, class YView>
Implementation softmax(const XView& x, const YView& y, Implementation implementation = Implementation::automatic) {
  static_assert(Kokkos::is_view<YView>::value, "softfuse::softmax: y must be a Kokkos::View");
  return softmax(typename YView::execution_space{}, x, y, implementation);
}

}  // namespace softfuse

#endif
