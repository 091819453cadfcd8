#ifndef SOFTFUSE_IMPL_ROW_SPLIT_HPP
#define SOFTFUSE_IMPL_ROW_SPLIT_HPP

// The split regime of the portable row kernel (softfuse_team_config.hpp): rows cut into chunks of
// plan.chunk elements over several teams, for rows beyond team scratch and for too few rows to fill the
// machine. Per group of plan.group_rows rows: a statistics pass writes each chunk's (max, sum) into a small
// workspace, then a write pass combines the row's partials and writes its chunk, reading the group back
// from cache. The partials are combined in one fixed order, so the result does not depend on scheduling.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>

#include "softfuse_row_pass.hpp"
#include "softfuse_team_config.hpp"

namespace softfuse {
namespace Impl {

template <class ExecSpace, class XView, class YView, class Op>
struct SplitRowsBase {
  using member_type                 = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using T                           = typename YView::non_const_value_type;
  using device_type                 = Kokkos::Device<ExecSpace, typename YView::memory_space>;
  static constexpr int B            = row_block_size<ExecSpace, true, true>();
  static constexpr bool interleaved = row_blocks_interleaved<ExecSpace>();

  XView x;
  YView y;
  Op op;
  // [unit]: each chunk's (max, sum), parts of one workspace (split_row_softmax)
  Kokkos::View<T*, device_type, Kokkos::MemoryUnmanaged> part_max;
  Kokkos::View<double*, device_type, Kokkos::MemoryUnmanaged> part_sum;
  std::int64_t first_row, chunk;
  int chunks;

  /// The chunk a team owns: its row, its first column and its extent. Last first (GPUs' write pass): the teams take the
  /// chunks in the reverse of the statistics pass's order, so those it read last, still in L2, go first. Host CPUs
  /// keep the order: each thread then reads back the chunk it read, from its own core's cache.
  struct Chunk {
    std::int64_t row, unit, begin, end;
  };
  KOKKOS_INLINE_FUNCTION Chunk chunk_of(const member_type& team, const bool last_first = false) const {
    const int unit = last_first ? team.league_size() - 1 - team.league_rank() : team.league_rank();
    const int r = unit / chunks, c = unit - r * chunks;
    const std::int64_t begin = c * chunk, cols = y.extent(1);
    return {first_row + r, unit, begin, begin + chunk < cols ? begin + chunk : cols};
  }
};

template <class ExecSpace, class XView, class YView, class Op>
struct SplitStatsFunctor : SplitRowsBase<ExecSpace, XView, YView, Op> {
  using base = SplitRowsBase<ExecSpace, XView, YView, Op>;
  using typename base::member_type;
  using typename base::T;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const auto c            = this->chunk_of(team);
    const auto x_part       = Kokkos::subview(this->x, c.row, Kokkos::make_pair(c.begin, c.end));
    const RowStats<T> stats = row_stats<T, base::B, base::interleaved>(TeamWorkers<member_type>{team}, x_part,
                                                                       NoCache(), ShiftedOp<Op>{this->op, c.begin});
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      this->part_max(c.unit) = stats.max;
      this->part_sum(c.unit) = stats.sum;
    });
  }
};

template <class ExecSpace, class XView, class YView, class Op>
struct SplitWriteFunctor : SplitRowsBase<ExecSpace, XView, YView, Op> {
  using base = SplitRowsBase<ExecSpace, XView, YView, Op>;
  using typename base::member_type;
  using typename base::T;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const auto c                  = this->chunk_of(team, !is_host_space<ExecSpace>());
    const std::int64_t first_unit = c.unit - c.begin / this->chunk;
    // The row's partials joined by the whole team (a row may have thousands): every team of the row has the
    // same size and joins them in the same order, so all get the same bits.
    RowStats<T> mine = RowStats<T>::identity();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, this->chunks), [&](const int k) {
      mine = RowStats<T>::combine(mine, {this->part_max(first_unit + k), this->part_sum(first_unit + k)});
    });
    const RowStats<T> stats = join_workers(TeamWorkers<member_type>{team}, mine);
    const auto x_part       = Kokkos::subview(this->x, c.row, Kokkos::make_pair(c.begin, c.end));
    const auto y_part       = Kokkos::subview(this->y, c.row, Kokkos::make_pair(c.begin, c.end));
    row_write<T, base::B, base::interleaved>(TeamWorkers<member_type>{team}, x_part, y_part, NoCache(),
                                             ShiftedOp<Op>{this->op, c.begin}, stats.max, stats.inverse_sum());
  }
};

template <class ExecSpace, class XView, class YView, class Op>
void split_row_softmax(const ExecSpace& space, const XView& x, const YView& y, const Op& op, const RowPlan& plan,
                       const char* label) {
  using base               = SplitRowsBase<ExecSpace, XView, YView, Op>;
  using policy_type        = Kokkos::TeamPolicy<ExecSpace>;
  const std::int64_t rows  = y.extent(0);
  const std::int64_t units = plan.group_rows * plan.chunks;
  // one allocation (each costs the call a device allocation and a free that waits for the device): the sums, then
  // the maxima (a T fits in a double's place)
  const Kokkos::View<double*, typename base::device_type> workspace(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "softfuse::split_workspace"), 2 * units);
  static_assert(sizeof(typename base::T) <= sizeof(double), "a maximum takes a double's place");
  base b{x, y, op, {}, {}, 0, plan.chunk, static_cast<int>(plan.chunks)};
  b.part_sum = decltype(b.part_sum)(workspace.data(), units);
  b.part_max = decltype(b.part_max)(reinterpret_cast<typename base::T*>(workspace.data() + units), units);
  SplitStatsFunctor<ExecSpace, XView, YView, Op> stats{b};
  SplitWriteFunctor<ExecSpace, XView, YView, Op> write{b};
  const int team = launch_team_size(plan.team_size,
                                    std::min(policy_type(space, 1, 1).team_size_max(stats, Kokkos::ParallelForTag()),
                                             policy_type(space, 1, 1).team_size_max(write, Kokkos::ParallelForTag())));
  for (std::int64_t first = 0; first < rows; first += plan.group_rows) {
    const int league = static_cast<int>(std::min(plan.group_rows, rows - first) * plan.chunks);
    stats.first_row = write.first_row = first;
    Kokkos::parallel_for(label, policy_type(space, league, team), stats);
    Kokkos::parallel_for(label, policy_type(space, league, team), write);
  }
}

}  // namespace Impl
}  // namespace softfuse

#endif
