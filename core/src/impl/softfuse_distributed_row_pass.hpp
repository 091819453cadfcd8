#ifndef SOFTFUSE_IMPL_DISTRIBUTED_ROW_PASS_HPP
#define SOFTFUSE_IMPL_DISTRIBUTED_ROW_PASS_HPP

// The row kernels of the distributed softmax, split where the ranks' statistics meet: one team per row runs
// TeamSoftmax::row_stats over the rank's piece of the row into stats(i), and after the reduction across ranks
// TeamSoftmax::write_row writes the piece from stats(i). The same team passes as the single-process softmax;
// the row is read twice (the reduction separates the passes, so no row stays in team scratch).

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "../softfuse_team_softmax.hpp"
#include "softfuse_row_stats.hpp"
#include "softfuse_team_config.hpp"

namespace softfuse {
namespace Impl {

template <class Stats>
struct RowStatsScalar;
template <class T>
struct RowStatsScalar<RowStats<T>> {
  using type = T;
};

template <class ExecSpace, class XView, class StatsView, class Op>
struct DistributedRowStatsFunctor {
  using T           = typename RowStatsScalar<typename StatsView::non_const_value_type>::type;
  using member_type = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  XView x;
  StatsView stats;
  Op op;
  std::int64_t first_row;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const std::int64_t i = first_row + team.league_rank();
    const RowStats<T> s  = TeamSoftmax::row_stats<T>(team, Kokkos::subview(x, i, Kokkos::ALL), NoCache(), op);
    Kokkos::single(Kokkos::PerTeam(team), [&]() { stats(i) = s; });
  }
};

template <class ExecSpace, class XView, class YView, class StatsView, class Op>
struct DistributedRowWriteFunctor {
  using member_type = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  XView x;
  YView y;
  StatsView stats;
  Op op;
  std::int64_t first_row;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const std::int64_t i = first_row + team.league_rank();
    const auto s         = stats(i);
    TeamSoftmax::write_row(team, Kokkos::subview(x, i, Kokkos::ALL), Kokkos::subview(y, i, Kokkos::ALL), NoCache(), op,
                           s.max, s.inverse_sum());
  }
};

// One team per row, shaped as the single-process kernel's streaming teams: wide on GPUs; on hosts one thread
// per row while there are rows for every thread, else the threads shared out among the rows.
template <class ExecSpace, class Functor>
void launch_distributed_rows(const ExecSpace& space, Functor functor, std::int64_t rows, const char* label) {
  using policy_type          = Kokkos::TeamPolicy<ExecSpace>;
  const std::int64_t threads = std::max(1, space.concurrency());
  const std::int64_t planned =
      is_host_space<ExecSpace>() ? std::max<std::int64_t>(1, threads / rows) : std::int64_t(kGpuStreamThreads);
  for (std::int64_t first = 0; first < rows; first += INT_MAX) {  // league sizes are int
    const int league   = static_cast<int>(std::min<std::int64_t>(rows - first, INT_MAX));
    const int team_max = policy_type(space, league, 1).team_size_max(functor, Kokkos::ParallelForTag());
    functor.first_row  = first;
    Kokkos::parallel_for(
        label,
        policy_type(space, league,
                    launch_team_size(static_cast<int>(std::min<std::int64_t>(planned, INT_MAX)), team_max)),
        functor);
  }
}

template <class StatsView>
struct RowStatsIdentityFill {
  StatsView stats;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    stats(i) = StatsView::non_const_value_type::identity();
  }
};

/// stats(i) = the (max, rescaled sum) of op(j, x(i, j)) over the local columns, asynchronously on `space`
/// (the identity for an empty shard).
template <class ExecSpace, class XView, class StatsView, class Op>
void local_row_stats(const ExecSpace& space, const XView& x, const StatsView& stats, const Op& op, const char* label) {
  const std::int64_t rows = x.extent(0), cols = x.extent(1);
  if (rows == 0) return;
  if (cols == 0) {
    Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(space, 0, rows),
                         RowStatsIdentityFill<StatsView>{stats});
    return;
  }
  launch_distributed_rows(space, DistributedRowStatsFunctor<ExecSpace, XView, StatsView, Op>{x, stats, op, 0}, rows,
                          label);
}

/// y(i, j) = exp(op(j, x(i, j)) - stats(i).max) * stats(i).inverse_sum(), asynchronously on `space`; x may be y.
template <class ExecSpace, class XView, class YView, class StatsView, class Op>
void write_rows(const ExecSpace& space, const XView& x, const YView& y, const StatsView& stats, const Op& op,
                const char* label) {
  if (y.extent(0) == 0 || y.extent(1) == 0) return;
  launch_distributed_rows(space, DistributedRowWriteFunctor<ExecSpace, XView, YView, StatsView, Op>{x, y, stats, op, 0},
                          y.extent(0), label);
}

}  // namespace Impl
}  // namespace softfuse

#endif
