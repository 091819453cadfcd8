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

#include "impl/softfuse_row_pass.hpp"
#include "impl/softfuse_team_config.hpp"

namespace softfuse {

struct TeamSoftmax {
  template <class Member, class XRow, class YRow, class Op = Impl::IdentityOp,
            std::enable_if_t<!Kokkos::is_view<Op>::value, int> = 0>
  KOKKOS_INLINE_FUNCTION static void invoke(const Member& team, const XRow& x_row, const YRow& y_row,
                                            const Op& op = Op()) {
    run(team, x_row, y_row, Impl::NoCache(), op);
  }

  /// As above, keeping op(j, x_j) in `row_cache` (team scratch, extent >= the row's) so x is read once.
  template <class Member, class XRow, class YRow, class CacheRow, class Op = Impl::IdentityOp,
            std::enable_if_t<Kokkos::is_view<CacheRow>::value, int> = 0>
  KOKKOS_INLINE_FUNCTION static void invoke(const Member& team, const XRow& x_row, const YRow& y_row,
                                            const CacheRow& row_cache, const Op& op = Op()) {
    run(team, x_row, y_row, row_cache, op);
  }

  /// The two passes of invoke on their own, for rows whose pieces lie in several places (softfuse::distributed
  /// combines the pieces' statistics in between): row_stats returns the maximum and the rescaled sum of
  /// op(j, x_j) over x_row (optionally keeping op(j, x_j) in `cache`, else pass Impl::NoCache()); write_row writes
  /// y_j = exp(op(j, x_j) - max) * inv_sum, reading op(j, x_j) back from the same `cache`.
  template <class T, class Member, class XRow, class Cache, class Op>
  KOKKOS_INLINE_FUNCTION static Impl::RowStats<T> row_stats(const Member& team, const XRow& x_row, const Cache& cache,
                                                            const Op& op) {
    using Space           = typename Member::execution_space;
    constexpr bool cached = Kokkos::is_view<Cache>::value;
    return Impl::row_stats<T, Impl::row_block_size<Space, cached>(), Impl::row_blocks_interleaved<Space>()>(
        Impl::TeamWorkers<Member>{team}, x_row, cache, op);
  }

  template <class Member, class XRow, class YRow, class Cache, class Op>
  KOKKOS_INLINE_FUNCTION static void write_row(const Member& team, const XRow& x_row, const YRow& y_row,
                                               const Cache& cache, const Op& op,
                                               const typename YRow::non_const_value_type max,
                                               const typename YRow::non_const_value_type inv_sum) {
    using T               = typename YRow::non_const_value_type;
    using Space           = typename Member::execution_space;
    constexpr bool cached = Kokkos::is_view<Cache>::value;
    Impl::row_write<T, Impl::row_block_size<Space, cached>(), Impl::row_blocks_interleaved<Space>()>(
        Impl::TeamWorkers<Member>{team}, x_row, y_row, cache, op, max, inv_sum);
  }

 private:
  template <class Member, class XRow, class YRow, class Cache, class Op>
  KOKKOS_INLINE_FUNCTION static void run(const Member& team, const XRow& x_row, const YRow& y_row, const Cache& cache,
                                         const Op& op) {
    using T                       = typename YRow::non_const_value_type;
    const Impl::RowStats<T> stats = row_stats<T>(team, x_row, cache, op);
    write_row(team, x_row, y_row, cache, op, stats.max, stats.inverse_sum());
  }
};

}  // namespace softfuse

#endif
