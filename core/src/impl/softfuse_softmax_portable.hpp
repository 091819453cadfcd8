#ifndef SOFTFUSE_IMPL_SOFTMAX_PORTABLE_HPP
#define SOFTFUSE_IMPL_SOFTMAX_PORTABLE_HPP

// The portable softmax, and the row kernel behind it and the fused layers: y(i, :) = softmax(op(j, x(i, j))),
// Kokkos TeamPolicy kernels in the regimes of softfuse_team_config.hpp (packed, team, chunked, split), each a
// kernel of its own with its own register budget and team shape.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "softfuse_host_row_pass.hpp"
#include "softfuse_row_chunks.hpp"
#include "softfuse_row_pass.hpp"
#include "softfuse_row_split.hpp"
#include "softfuse_row_vectors.hpp"
#include "softfuse_team_config.hpp"

namespace softfuse {
namespace Impl {

/// Packed: team thread r of team t owns row first_row + t * team_size + r, over its vector lanes; cached
/// rows take consecutive stretches of the team's scratch.
template <class ExecSpace, class XView, class YView, class Op, bool Cached>
struct PackedRowsFunctor {
  using member_type      = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using T                = typename YView::non_const_value_type;
  static constexpr int B = row_block_size<ExecSpace, true>();

  XView x;
  YView y;
  Op op;
  std::int64_t first_row, rows;
  int lanes;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const std::int64_t cols = y.extent(1), base = first_row + std::int64_t(team.league_rank()) * team.team_size();
    const std::int64_t count = rows - base < team.team_size() ? rows - base : team.team_size();
    row_cache_t<ExecSpace, T> scratch;
    if constexpr (Cached) scratch = row_cache_t<ExecSpace, T>(team.team_scratch(0), team.team_size() * cols);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count), [&](const std::int64_t r) {
      const auto x_row = Kokkos::subview(x, base + r, Kokkos::ALL);
      const auto y_row = Kokkos::subview(y, base + r, Kokkos::ALL);
      const VectorWorkers<member_type> workers{team, lanes};
      if constexpr (Cached)
        row_softmax_pass<T, B, row_blocks_interleaved<ExecSpace>()>(
            workers, x_row, y_row, Kokkos::subview(scratch, Kokkos::make_pair(r * cols, (r + 1) * cols)), op);
      else
        row_softmax_pass<T, B, row_blocks_interleaved<ExecSpace>()>(workers, x_row, y_row, NoCache(), op);
    });
  }
};

/// Staged (packed, GPUs): team thread r of team t owns row first_row + t * team_size + r. The team moves its
/// rows between memory and team scratch as one range of (row, column) in row-major order, consecutive threads
/// on consecutive runs of W elements (coalesced where rows are contiguous), U elements per thread at a time; each
/// thread computes its row's statistics in scratch (rows at an odd stride: a warp's threads read different banks)
/// and leaves there its row's factor, by which the move back to memory scales each element (held_row_write's
/// product, without a pass of its own). Every thread runs the statistics, over an empty row past the last one, so
/// no thread leaves a vector reduction. U: elements in flight per thread (staged_run_loads in runs, else
/// staged_loads). Runs: where both Views' rows are contiguous, aligned and of whole runs, memory is accessed in runs
/// of kRowVectorBytes (staged_runs).
template <class ExecSpace, class XView, class YView, class Op, int U, bool Runs>
struct StagedRowsFunctor {
  using member_type      = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using T                = typename YView::non_const_value_type;
  static constexpr int B = row_block_size<ExecSpace, true>();
  static constexpr int V = kRowVectorBytes / static_cast<int>(sizeof(T));  // elements of a run

  XView x;
  YView y;
  Op op;
  std::int64_t first_row, rows;

  /// store(k, r, j, load(k, r, j)) for the first n elements k of the team's rows of `cols` in row-major order, W
  /// at a time (n and cols multiples of W), r and j the row and column of k. Whole: W times the team size is a
  /// multiple of cols, so each thread keeps its column.
  template <int W, bool Whole, class Load, class Store>
  KOKKOS_INLINE_FUNCTION static void move(const member_type& team, const int n, const int cols, const Load& load,
                                          const Store& store) {
    constexpr int A = U / W;  // accesses in flight per thread
    const int span = W * team.team_size(), step_rows = span / cols, step_cols = span - step_rows * cols;
    int r = W * team.team_rank() / cols, j = W * team.team_rank() - r * cols;
    for (int k0 = W * team.team_rank(); k0 < n; k0 += A * span) {
      int rr[A], jj[A];
      RowVector<T, W> v[A];
      for (int a = 0; a < A; ++a) {
        rr[a] = r;
        jj[a] = j;
        r += step_rows;
        if (!Whole) {
          j += step_cols;
          if (j >= cols) {
            j -= cols;
            ++r;
          }
        }
      }
      if (k0 + (A - 1) * span < n) {  // no element of this step past the team's rows: no guards
        for (int a = 0; a < A; ++a) v[a] = load(k0 + a * span, rr[a], jj[a]);
        for (int a = 0; a < A; ++a) store(k0 + a * span, rr[a], jj[a], v[a]);
      } else {
        for (int a = 0; a < A; ++a)
          if (k0 + a * span < n) v[a] = load(k0 + a * span, rr[a], jj[a]);
        for (int a = 0; a < A; ++a)
          if (k0 + a * span < n) store(k0 + a * span, rr[a], jj[a], v[a]);
      }
    }
  }
  template <int W, class Load, class Store>
  KOKKOS_INLINE_FUNCTION static void move(const member_type& team, const int n, const int cols, const Load& load,
                                          const Store& store) {
    if (W * team.team_size() % cols == 0)
      move<W, true>(team, n, cols, load, store);
    else
      move<W, false>(team, n, cols, load, store);
  }

  /// Rows of `cols` consecutive elements (LayoutRight and its like): the team's range is one run in memory.
  template <class View>
  KOKKOS_INLINE_FUNCTION static bool contiguous_rows(const View& v, const std::int64_t cols) {
    return v.stride(1) == 1 && static_cast<std::int64_t>(v.stride(0)) == cols;
  }

  /// Whether x and y can be moved in runs of V: contiguous rows of a whole number of runs, aligned, one type.
  static bool takes_runs(const XView& x, const YView& y) {
    const std::int64_t cols = y.extent(1);
    return std::is_same<typename XView::non_const_value_type, T>::value && V > 1 && U % V == 0 && cols % V == 0 &&
           contiguous_rows(x, cols) && contiguous_rows(y, cols) && starts_row_vector(x.data()) &&
           starts_row_vector(y.data());
  }

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    constexpr int W         = Runs ? V : 1;
    const std::int64_t cols = y.extent(1), stride = staged_stride(cols);
    const std::int64_t base = first_row + std::int64_t(team.league_rank()) * team.team_size();
    const int count         = static_cast<int>(rows - base < team.team_size() ? rows - base : team.team_size());
    const int n = count * static_cast<int>(cols), c = static_cast<int>(cols);
    const row_cache_t<ExecSpace, T> s(team.team_scratch(0), staged_scratch(team.team_size(), cols));
    const auto at     = [&](const int r, const int j) { return r * stride + j; };
    const auto to_row = [&](const int, const int r, const int j, const RowVector<T, W>& v) {
      for (int i = 0; i < W; ++i) s(at(r, j + i)) = v.v[i];
    };
    if (Runs || contiguous_rows(x, cols)) {
      const auto* const run = x.data() + base * cols;
      move<W>(
          team, n, c, [&](const int k, const int, const int) { return load_run<W, T>(run + k); }, to_row);
    } else {
      move<W>(
          team, n, c,
          [&](const int, const int r, const int j) { return RowVector<T, W>{{static_cast<T>(x(base + r, j))}}; },
          to_row);
    }
    team.team_barrier();
    const int me            = team.team_rank();
    const std::int64_t len  = me < count ? cols : 0;
    const auto row          = Kokkos::subview(s, Kokkos::make_pair(at(me, 0), at(me, 0) + len));
    T* const factors        = &s(team.team_size() * stride);  // one per row, after the rows
    T shift                 = 0;
    const RowStats<T> stats = held_row_stats<T, B, false>(VectorWorkers<member_type>{team, 1}, row, row, op, shift);
    Kokkos::single(Kokkos::PerThread(team),
                   [&]() { factors[me] = held_row_factor(shift, stats.max, stats.inverse_sum()); });
    team.team_barrier();
    const auto from_row = [&](const int, const int r, const int j) {
      RowVector<T, W> v;
      for (int i = 0; i < W; ++i) v.v[i] = s(at(r, j + i)) * factors[r];
      return v;
    };
    if (Runs || contiguous_rows(y, cols)) {
      auto* const run = y.data() + base * cols;
      move<W>(team, n, c, from_row,
              [&](const int k, const int, const int, const RowVector<T, W>& v) { store_run<W>(run + k, v); });
    } else {
      move<W>(team, n, c, from_row,
              [&](const int, const int r, const int j, const RowVector<T, W>& v) { y(base + r, j) = v.v[0]; });
    }
  }
};

/// Team: one team per row (TeamSoftmax), the row held in team scratch. Lanes > 0: launched with teams of Lanes
/// threads exactly (TeamWorkers' compile-time count).
/// Rolling (GPUs, Lanes > 0): rows of which team scratch holds one per multiprocessor, on persistent teams, team t
/// taking rows first_row + t, + league size, ... Each row's statistics pass writes out the row before it from the
/// same cache entries (HeldRowFlush: each worker its own entries, so no barrier), so that a multiprocessor's stores of
/// one row are in flight with the loads of the next, where one team per row leaves the multiprocessor's memory
/// traffic to its one team's phases. The statistics pass loads a block ahead (H200, 8192 x 32768: 78.4 / 78.4 % of
/// copy against 77.2 / 77.9 % without, docs/portable_path.md), and each worker loads its first block of the next row
/// with its last block of the current one (RowAhead), so that the load is in flight across the join.
template <class ExecSpace, class XView, class YView, class Op, int Lanes = 0, bool Rolling = false>
struct TeamRowFunctor {
  static_assert(!Rolling || Lanes > 0, "rolling team rows take teams of a compile-time size");
  using member_type = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using T           = typename YView::non_const_value_type;

  XView x;
  YView y;
  Op op;
  std::int64_t first_row;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    constexpr int B = row_block_size<ExecSpace, true>();
    const TeamWorkers<member_type, Lanes> workers{team};
    const row_cache_t<ExecSpace, T> cache(team.team_scratch(0), y.extent(1));
    const auto x_row = [&](const std::int64_t r) { return Kokkos::subview(x, r, Kokkos::ALL); };
    const auto y_row = [&](const std::int64_t r) { return Kokkos::subview(y, r, Kokkos::ALL); };
    std::int64_t i   = first_row + team.league_rank();
    if constexpr (Rolling) {
      const std::int64_t rows = y.extent(0), stride = team.league_size();
      const auto after = [&](const std::int64_t r) { return r + stride < rows ? r + stride : -1; };
      RowAhead<XView, T, B> ahead{x, after(i)};
      T shift           = 0;
      RowStats<T> stats = held_row_stats<T, B, true>(workers, x_row(i), cache, op, shift, NoHeldFlush(), ahead);
      for (; i + stride < rows; i += stride) {
        const HeldRowFlush<decltype(y_row(i)), T> flush{y_row(i),
                                                        held_row_factor(shift, stats.max, stats.inverse_sum())};
        ahead.next = after(i + stride);
        stats      = held_row_stats<T, B, true>(workers, x_row(i + stride), cache, op, shift, flush, ahead);
      }
      held_row_write<T, B>(workers, y_row(i), cache, shift, stats.max, stats.inverse_sum());
    } else {
      row_softmax_pass<T, B, row_blocks_interleaved<ExecSpace>()>(workers, x_row(i), y_row(i), cache, op);
    }
  }
};

/// The rolling team rows of `plan` on teams of Lanes threads (launch bounds of one team per multiprocessor); false
/// (nothing launched) where the backend does not allow Lanes threads for them.
template <int Lanes, class ExecSpace, class XView, class YView, class Op>
bool launch_rolling_team_rows(const ExecSpace& space, const XView& x, const YView& y, const Op& op, const RowPlan& plan,
                              const char* label) {
  using T           = typename YView::non_const_value_type;
  using policy_type = Kokkos::TeamPolicy<ExecSpace, Kokkos::LaunchBounds<Lanes, 1>>;
  if (plan.team_size != Lanes) return false;
  const TeamRowFunctor<ExecSpace, XView, YView, Op, Lanes, true> functor{x, y, op, 0};
  const std::size_t bytes = row_cache_t<ExecSpace, T>::shmem_size(y.extent(1));
  policy_type probe(space, 1, 1);
  probe.set_scratch_size(0, Kokkos::PerTeam(bytes));
  if (probe.team_size_max(functor, Kokkos::ParallelForTag()) < Lanes) return false;
  policy_type policy(space, static_cast<int>(std::min<std::int64_t>(plan.rolling, y.extent(0))), Lanes);
  policy.set_scratch_size(0, Kokkos::PerTeam(bytes));
  Kokkos::parallel_for(label, policy, functor);
  return true;
}

/// The team size of `functor` under `plan`: the plan's within what the backend allows for this functor (a power
/// of two), `scratch_bytes(team_size)` being the team scratch it takes.
template <class ExecSpace, class Functor, class ScratchBytes>
int rows_team_size(const ExecSpace& space, const Functor& functor, const RowPlan& plan,
                   const ScratchBytes& scratch_bytes) {
  Kokkos::TeamPolicy<ExecSpace> probe(space, 1, 1, plan.vector_length);
  probe.set_scratch_size(0, Kokkos::PerTeam(scratch_bytes(plan.team_size)));
  return launch_team_size(plan.team_size, probe.team_size_max(functor, Kokkos::ParallelForTag()));
}

/// Runs `functor` over `rows` rows, one per team or (`packed`) one per team thread, in leagues of at most
/// INT_MAX teams, with teams of rows_team_size.
template <class ExecSpace, class Functor, class ScratchBytes>
void launch_rows(const ExecSpace& space, Functor functor, std::int64_t rows, bool packed, const RowPlan& plan,
                 const ScratchBytes& scratch_bytes, const char* label) {
  using policy_type           = Kokkos::TeamPolicy<ExecSpace>;
  const int team              = rows_team_size(space, functor, plan, scratch_bytes);
  const std::int64_t per_team = packed ? team : 1, teams = (rows + per_team - 1) / per_team;
  for (std::int64_t t0 = 0; t0 < teams; t0 += INT_MAX) {
    const int league = static_cast<int>(std::min<std::int64_t>(teams - t0, INT_MAX));
    policy_type policy(space, league, team, plan.vector_length);
    if (const std::size_t bytes = scratch_bytes(team)) policy.set_scratch_size(0, Kokkos::PerTeam(bytes));
    functor.first_row = t0 * per_team;
    Kokkos::parallel_for(label, policy, functor);
  }
}

/// The team regime with teams of Lanes threads, the workers' count known at compile time, where `team` (the team
/// size of the generic functor) is Lanes and the backend allows it for this functor; false otherwise.
template <int Lanes, class ExecSpace, class XView, class YView, class Op, class ScratchBytes>
bool launch_team_rows_fixed(const ExecSpace& space, const XView& x, const YView& y, const Op& op, const RowPlan& plan,
                            const int team, const ScratchBytes& scratch_bytes, const char* label) {
  if (team != Lanes) return false;
  RowPlan fixed_plan   = plan;
  fixed_plan.team_size = Lanes;
  const TeamRowFunctor<ExecSpace, XView, YView, Op, Lanes> functor{x, y, op, 0};
  if (rows_team_size(space, functor, fixed_plan, scratch_bytes) != Lanes) return false;
  launch_rows(space, functor, y.extent(0), false, fixed_plan, scratch_bytes, label);
  return true;
}

/// The staged rows with U elements in flight per thread, in runs or element by element; false (nothing launched)
/// where the Views cannot be moved in runs.
template <int U, bool Runs, class ExecSpace, class XView, class YView, class Op>
bool launch_staged_rows(const ExecSpace& space, const XView& x, const YView& y, const Op& op, const RowPlan& plan,
                        const char* label) {
  using T         = typename YView::non_const_value_type;
  using functor_t = StagedRowsFunctor<ExecSpace, XView, YView, Op, U, Runs>;
  if (Runs && !functor_t::takes_runs(x, y)) return false;
  const auto cols  = y.extent(1);
  const auto rows  = static_cast<std::int64_t>(y.extent(0));
  const auto bytes = [&](int team) { return row_cache_t<ExecSpace, T>::shmem_size(staged_scratch(team, cols)); };
  launch_rows(space, functor_t{x, y, op, 0, rows}, rows, true, plan, bytes, label);
  return true;
}

/// The staged rows: in runs where the plan and the Views allow them, with the plan's elements in flight for each.
template <class ExecSpace, class XView, class YView, class Op>
void launch_staged_rows(const ExecSpace& space, const XView& x, const YView& y, const Op& op, const RowPlan& plan,
                        const char* label) {
  if (plan.staged_runs && (plan.staged_run_loads == 16 ? launch_staged_rows<16, true>(space, x, y, op, plan, label)
                                                       : launch_staged_rows<8, true>(space, x, y, op, plan, label)))
    return;
  if (plan.staged_loads == 16)
    launch_staged_rows<16, false>(space, x, y, op, plan, label);
  else
    launch_staged_rows<8, false>(space, x, y, op, plan, label);
}

/// Runs `plan` (from plan_rows, or another plan for the same shape: perf/bench/portable_plans_bench.cpp
/// compares them): y(i, :) = softmax(op(j, x(i, j))) for every row.
template <class ExecSpace, class XView, class YView, class Op>
void run_row_plan(const ExecSpace& space, const XView& x, const YView& y, const Op& op, const RowPlan& plan,
                  const char* label) {
  if constexpr (is_host_space<ExecSpace>()) {
    // packed and team: one exponential per element, y written once (hosts plan no chunked rows)
    if (plan.regime == RowRegime::split) return split_row_softmax(space, x, y, op, plan, label);
    return host_row_softmax(space, x, y, op, plan, label);
  } else {
    using T                 = typename YView::non_const_value_type;
    const std::int64_t rows = y.extent(0), cols = y.extent(1);
    const auto scratch_bytes = [](std::int64_t n) { return row_cache_t<ExecSpace, T>::shmem_size(n); };
    const auto packed_bytes  = [&](int team) { return plan.cached ? scratch_bytes(team * cols) : 0; };
    switch (plan.regime) {
      case RowRegime::packed:
        if (plan.staged)
          launch_staged_rows(space, x, y, op, plan, label);
        else if (plan.cached)
          launch_rows(space,
                      PackedRowsFunctor<ExecSpace, XView, YView, Op, true>{x, y, op, 0, rows, plan.vector_length}, rows,
                      true, plan, packed_bytes, label);
        else
          launch_rows(space,
                      PackedRowsFunctor<ExecSpace, XView, YView, Op, false>{x, y, op, 0, rows, plan.vector_length},
                      rows, true, plan, packed_bytes, label);
        break;
      case RowRegime::team: {
        if (plan.rolling > 0 && launch_rolling_team_rows<kGpuHeldRowThreads>(space, x, y, op, plan, label)) break;
        const auto row_bytes = [&](int) { return scratch_bytes(cols); };
        const TeamRowFunctor<ExecSpace, XView, YView, Op> generic{x, y, op, 0};
        const int team = rows_team_size(space, generic, plan, row_bytes);
        if (!launch_team_rows_fixed<128>(space, x, y, op, plan, team, row_bytes, label) &&
            !launch_team_rows_fixed<256>(space, x, y, op, plan, team, row_bytes, label) &&
            !launch_team_rows_fixed<512>(space, x, y, op, plan, team, row_bytes, label))
          launch_rows(space, generic, rows, false, plan, row_bytes, label);
        break;
      }
      case RowRegime::chunked: chunked_row_softmax(space, x, y, op, plan, label); break;
      case RowRegime::split: split_row_softmax(space, x, y, op, plan, label); break;
    }
  }
}

/// y(i, :) = softmax(op(j, x(i, j))) for every row, asynchronously on `space`, except the chunked and split
/// regimes, whose per-call workspace View is freed on return (on CUDA a cudaFree, which waits for the device);
/// x may be y. Rows are held in team scratch where they fit and `cache` allows.
template <class ExecSpace, class XView, class YView, class Op>
void row_softmax(const ExecSpace& space, const XView& x, const YView& y, const Op& op, bool cache, const char* label) {
  using T                 = typename YView::non_const_value_type;
  const std::int64_t rows = y.extent(0), cols = y.extent(1);
  if (rows == 0 || cols == 0) return;
  const auto scratch_bytes = [](std::int64_t n) { return row_cache_t<ExecSpace, T>::shmem_size(n); };
  run_row_plan(space, x, y, op, plan_rows(space, rows, cols, sizeof(T), cache, scratch_bytes), label);
}

/// The portable softmax. On CPUs the second read of a row hits the cache anyway, so rows are held in team
/// scratch only where that saves a memory pass (GPUs).
template <class ExecSpace, class XView, class YView>
void softmax_portable(const ExecSpace& space, const XView& x, const YView& y) {
  row_softmax(space, x, y, IdentityOp(), row_cache_pays<ExecSpace>(), "softfuse::softmax[portable]");
}

}  // namespace Impl
}  // namespace softfuse

#endif
