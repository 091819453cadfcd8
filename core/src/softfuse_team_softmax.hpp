#ifndef SOFTFUSE_TEAM_SOFTMAX_HPP
#define SOFTFUSE_TEAM_SOFTMAX_HPP

/// \file
/// Team-level softmax: a building block to call inside your own Kokkos team kernels.
///
///   Kokkos::parallel_for(Kokkos::TeamPolicy<Space>(space, rows, Kokkos::AUTO),
///     KOKKOS_LAMBDA(const member_type& team) {
///       auto x_row = Kokkos::subview(x, team.league_rank(), Kokkos::ALL);
///       auto y_row = Kokkos::subview(y, team.league_rank(), Kokkos::ALL);
///       softfuse::TeamSoftmax::invoke(team, x_row, y_row);
///     });
///
/// The whole team works on one row: one pass computes the maximum and the rescaled sum together,
/// a second pass writes y. Pass a rank-1 team-scratch View of the row's length as `row_cache` and
/// the row is read from memory once (then written once). x_row and y_row may be the same View.
/// Every thread of the team must call invoke; it synchronizes through the team reduction.
/// An optional elementwise `op(j, x_j)` transforms each element before the softmax (the fused
/// layers pass bias/GELU/BatchNorm that way): y = softmax(op(j, x_j)).

#include <Kokkos_Core.hpp>
#include <type_traits>

#include "impl/softfuse_row_stats.hpp"

namespace softfuse {

namespace Impl {
struct IdentityOp {
  template <class I, class T>
  KOKKOS_INLINE_FUNCTION T operator()(const I, const T x) const {
    return x;
  }
};
}  // namespace Impl

struct TeamSoftmax {
  template <class Member, class XRow, class YRow, class Op = Impl::IdentityOp,
            std::enable_if_t<!Kokkos::is_view<Op>::value, int> = 0>
  KOKKOS_INLINE_FUNCTION static void invoke(const Member& team, const XRow& x_row, const YRow& y_row,
                                            const Op& op = Op()) {
    using T = typename YRow::non_const_value_type;
    const auto n = y_row.extent(0);
    Impl::RowStats<T> stats;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, n),
        [&](const decltype(n) j, Impl::RowStats<T>& acc) { acc.push(op(j, static_cast<T>(x_row(j)))); },
        Impl::RowStatsReducer<T>(stats));
    const T inv = stats.inverse_sum();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n), [&](const decltype(n) j) {
      y_row(j) = Impl::exp(op(j, static_cast<T>(x_row(j))) - stats.max) * inv;
    });
  }

  /// As above, keeping op(j, x_j) in `row_cache` (team scratch, extent >= the row's) so x is read once.
  template <class Member, class XRow, class YRow, class CacheRow, class Op = Impl::IdentityOp,
            std::enable_if_t<Kokkos::is_view<CacheRow>::value, int> = 0>
  KOKKOS_INLINE_FUNCTION static void invoke(const Member& team, const XRow& x_row, const YRow& y_row,
                                            const CacheRow& row_cache, const Op& op = Op()) {
    using T = typename YRow::non_const_value_type;
    const auto n = y_row.extent(0);
    Impl::RowStats<T> stats;
    // Each thread later reads back exactly the cache entries it wrote (same TeamThreadRange
    // partition), so no barrier is needed between the passes.
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, n),
        [&](const decltype(n) j, Impl::RowStats<T>& acc) {
          const T v = op(j, static_cast<T>(x_row(j)));
          row_cache(j) = v;
          acc.push(v);
        },
        Impl::RowStatsReducer<T>(stats));
    const T inv = stats.inverse_sum();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, n),
                         [&](const decltype(n) j) { y_row(j) = Impl::exp(row_cache(j) - stats.max) * inv; });
  }
};

}  // namespace softfuse

#endif
