#ifndef SOFTFUSE_IMPL_ROW_CHUNKS_HPP
#define SOFTFUSE_IMPL_ROW_CHUNKS_HPP

// The chunked regime of the portable row kernel on GPUs (softfuse_team_config.hpp): rows beyond team
// scratch, or too few rows to fill the device, cut into plan.chunks chunks of plan.chunk elements, one team
// per chunk, in one kernel. A team holds (the first plan.cached_chunk elements of) its chunk in team scratch,
// publishes the chunk's (max, sum), waits until every chunk of its row has published, joins them and writes
// its chunk from scratch: each element is read from memory once.
//
// Partials are 8-byte words that announce themselves: a slot holds all ones until its chunk stores it, and no
// stored value has all bits set (a chunk's maximum is never NaN; a NaN sum is stored as the canonical quiet
// NaN). A team reads each of its row's slots until it is filled, with no fence and no counter (fences and a
// counter per team measured slower, docs/portable_path.md).
//
// Waiting on other teams needs them to run: teams take their chunks in the order they start (a ticket from a
// global counter, not league_rank), so every chunk of a row is taken by a team that started no later than
// the row's last one; a row waits only on teams that are running or done as long as at most plan.chunks teams
// are always resident, and plan_rows keeps plan.chunks at or below one team per multiprocessor's worth of
// concurrency (2048 threads), which every GPU holds at this team shape. The same order of the join in every
// team of a row gives every chunk the same bits.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>

#include "softfuse_row_pass.hpp"
#include "softfuse_team_config.hpp"

namespace softfuse {
namespace Impl {

/// A partial's word: the bits of a double, all ones meaning "not stored yet".
constexpr std::uint64_t kEmptyPartial = ~std::uint64_t(0);

KOKKOS_INLINE_FUNCTION std::uint64_t partial_word(const double v) {
  if (v != v) return 0x7ff8000000000000ull;  // one quiet NaN for every NaN, never all ones
  std::uint64_t w;
  std::memcpy(&w, &v, sizeof w);
  return w;
}

KOKKOS_INLINE_FUNCTION double partial_value(const std::uint64_t w) {
  double v;
  std::memcpy(&v, &w, sizeof v);
  return v;
}

/// Pipelined: the statistics pass loads a block ahead (row_stats), for teams with registers to spare.
template <class ExecSpace, class XView, class YView, class Op, bool Pipelined>
struct ChunkedRowsFunctor {
  using member_type = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using T           = typename YView::non_const_value_type;
  using device_type = Kokkos::Device<ExecSpace, typename YView::memory_space>;
  using cache_type =
      Kokkos::View<T*, typename ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  static constexpr int B            = row_block_size<ExecSpace, true>();
  static constexpr bool interleaved = row_blocks_interleaved<ExecSpace>();

  XView x;
  YView y;
  Op op;
  // [row * chunks + chunk], kEmptyPartial at first; parts of one workspace (chunked_row_softmax)
  Kokkos::View<std::uint64_t*, device_type, Kokkos::MemoryUnmanaged> part_max, part_sum;
  // [launch]: the last chunk of the launch taken, -1 at first (all ones, as the partials; int: a native atomic)
  int* ticket;
  std::int64_t first_row, chunk, cached_chunk;
  int chunks, launch;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    int unit = 0;
    Kokkos::single(
        Kokkos::PerTeam(team), [&](int& t) { t = Kokkos::atomic_fetch_add(&ticket[launch], 1) + 1; }, unit);
    const std::int64_t row_in_launch = unit / chunks, row = first_row + row_in_launch;
    const std::int64_t begin = (unit - row_in_launch * chunks) * chunk, cols = y.extent(1);
    const std::int64_t end  = begin + chunk < cols ? begin + chunk : cols;
    const std::int64_t mid  = begin + cached_chunk < end ? begin + cached_chunk : end;
    const std::int64_t slot = row * chunks + (unit - row_in_launch * chunks);
    const TeamWorkers<member_type> workers{team};
    const cache_type cache(team.team_scratch(0), cached_chunk);
    const auto x_held = Kokkos::subview(x, row, Kokkos::make_pair(begin, mid));
    const auto x_rest = Kokkos::subview(x, row, Kokkos::make_pair(mid, end));
    const ShiftedOp<Op> op_held{op, begin}, op_rest{op, mid};

    T shift           = 0;
    RowStats<T> stats = held_row_stats<T, B, Pipelined>(workers, x_held, cache, op_held, shift);
    if (mid < end)
      stats = RowStats<T>::combine(stats, row_stats<T, B, interleaved, Pipelined>(workers, x_rest, NoCache(), op_rest));
    Kokkos::single(Kokkos::PerTeam(team), [&]() {
      *static_cast<volatile std::uint64_t*>(&part_max(slot)) = partial_word(static_cast<double>(stats.max));
      *static_cast<volatile std::uint64_t*>(&part_sum(slot)) = partial_word(stats.sum);
    });

    // Volatile loads: the partials are written by other teams during this kernel (no stale cached copy).
    const volatile std::uint64_t* maxima = &part_max(row * chunks);
    const volatile std::uint64_t* sums   = &part_sum(row * chunks);
    RowStats<T> mine                     = RowStats<T>::identity();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, chunks), [&](const int k) {
      std::uint64_t m, s;
      while ((m = maxima[k]) == kEmptyPartial) {
      }
      while ((s = sums[k]) == kEmptyPartial) {
      }
      mine = RowStats<T>::combine(mine, {static_cast<T>(partial_value(m)), partial_value(s)});
    });
    const RowStats<T> row_total = join_workers(workers, mine);
    const T inv                 = row_total.inverse_sum();
    held_row_write<T, B>(workers, Kokkos::subview(y, row, Kokkos::make_pair(begin, mid)), cache, shift, row_total.max,
                         inv);
    if (mid < end)
      row_write<T, B, interleaved>(workers, x_rest, Kokkos::subview(y, row, Kokkos::make_pair(mid, end)), NoCache(),
                                   op_rest, row_total.max, inv);
  }
};

/// The largest team Kokkos allows for the chunked kernel `f` with `Bounds` and `scratch` bytes of team scratch.
template <class Bounds, class ExecSpace, class Functor>
int chunk_team_size_max(const ExecSpace& space, const Functor& f, const std::size_t scratch) {
  Kokkos::TeamPolicy<ExecSpace, Bounds> probe(space, 1, 1);
  probe.set_scratch_size(0, Kokkos::PerTeam(scratch));
  return probe.team_size_max(f, Kokkos::ParallelForTag());
}

/// The rows of one launch of the chunked kernel: at most INT_MAX chunks, so that a ticket is an int.
inline std::int64_t chunk_launch_rows(const RowPlan& plan) { return std::max<std::int64_t>(1, INT_MAX / plan.chunks); }

/// The launches of the chunked kernel over `rows` rows, each with its own ticket.
inline std::int64_t chunk_launches(const std::int64_t rows, const RowPlan& plan) {
  return (rows + chunk_launch_rows(plan) - 1) / chunk_launch_rows(plan);
}

/// Launches the chunked kernel over all rows with `Bounds`: launches of chunk_launch_rows rows, each with its own
/// ticket counter.
template <class Bounds, class ExecSpace, class Functor>
void launch_chunks(const ExecSpace& space, Functor f, const std::int64_t rows, const RowPlan& plan,
                   const std::size_t scratch, const int team, const char* label) {
  using policy_type             = Kokkos::TeamPolicy<ExecSpace, Bounds>;
  const std::int64_t per_launch = chunk_launch_rows(plan);
  for (std::int64_t l = 0; l < chunk_launches(rows, plan); ++l) {
    f.launch         = static_cast<int>(l);
    f.first_row      = l * per_launch;
    const int league = static_cast<int>(std::min(per_launch, rows - f.first_row) * plan.chunks);
    policy_type policy(space, league, team);
    policy.set_scratch_size(0, Kokkos::PerTeam(scratch));
    Kokkos::parallel_for(label, policy, f);
  }
}

/// Runs the chunked regime over all rows. The workspace (partials, tickets) is allocated per call, as one allocation
/// filled once (each allocation costs the call a device allocation and a free that waits for the device).
template <class ExecSpace, class XView, class YView, class Op>
void chunked_row_softmax(const ExecSpace& space, const XView& x, const YView& y, const Op& op, const RowPlan& plan,
                         const char* label) {
  // Registers for 4 teams of kGpuRowThreads per multiprocessor, so resident teams stream while others wait,
  // where team scratch lets 4 teams share a multiprocessor. Larger chunks (at most two teams per multiprocessor,
  // kGpuChunkBytes) take up to twice the registers, and with them the statistics pass loads a block ahead
  // (H100, chunks of 26368 floats: 4096 x 393216 70 % of copy against 68 %; with 4 teams of 64 registers
  // loading ahead spills: 55 % against 66 %).
  using four_per_multiprocessor = Kokkos::LaunchBounds<kGpuRowThreads, 4>;
  using two_per_multiprocessor  = Kokkos::LaunchBounds<kGpuRowThreads, 2>;
  using lean_type               = ChunkedRowsFunctor<ExecSpace, XView, YView, Op, false>;
  using ahead_type              = ChunkedRowsFunctor<ExecSpace, XView, YView, Op, true>;
  using partials_type           = decltype(lean_type::part_max);
  const std::int64_t rows       = y.extent(0);
  const std::int64_t partials   = rows * plan.chunks;
  const std::int64_t launches   = chunk_launches(rows, plan);
  // maxima, sums, then the tickets (two ints a word), all ones
  const Kokkos::View<std::uint64_t*, typename lean_type::device_type> workspace(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "softfuse::chunk_workspace"),
      2 * partials + (launches + 1) / 2);
  Kokkos::deep_copy(space, workspace, kEmptyPartial);
  const partials_type part_max(workspace.data(), partials), part_sum(workspace.data() + partials, partials);
  int* const ticket         = reinterpret_cast<int*>(workspace.data() + 2 * partials);
  const std::size_t scratch = lean_type::cache_type::shmem_size(plan.cached_chunk);
  const lean_type lean{
      x, y, op, part_max, part_sum, ticket, 0, plan.chunk, plan.cached_chunk, static_cast<int>(plan.chunks), 0};
  const int four_team = chunk_team_size_max<four_per_multiprocessor>(space, lean, scratch);
  if (four_team >= plan.team_size)
    return launch_chunks<four_per_multiprocessor>(space, lean, rows, plan, scratch,
                                                  launch_team_size(plan.team_size, four_team), label);
  const ahead_type ahead{
      x, y, op, part_max, part_sum, ticket, 0, plan.chunk, plan.cached_chunk, static_cast<int>(plan.chunks), 0};
  launch_chunks<two_per_multiprocessor>(
      space, ahead, rows, plan, scratch,
      launch_team_size(plan.team_size, chunk_team_size_max<two_per_multiprocessor>(space, ahead, scratch)), label);
}

}  // namespace Impl
}  // namespace softfuse

#endif
