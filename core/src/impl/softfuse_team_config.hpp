#ifndef SOFTFUSE_IMPL_TEAM_CONFIG_HPP
#define SOFTFUSE_IMPL_TEAM_CONFIG_HPP

// How the portable row kernels (softfuse_softmax_portable.hpp) cut the work into teams, from what Kokkos
// reports about the backend (concurrency, team scratch, vector length), never from a device name.
//
// Four regimes, by row length and row count:
//  - packed: several rows per team, one team thread per row, the row spread over the thread's vector lanes
//    (GPUs: short rows, so a row costs no team barrier; the shortest staged: the team moves its rows through
//    team scratch as one range and each thread computes its row there; host CPUs: rows for every thread, one
//    thread per row, softfuse_host_row_pass.hpp);
//  - team: one team per row, the row held in team scratch (GPUs: rows up to the team-scratch limit, read
//    from memory once; rows of which scratch holds one per multiprocessor on persistent teams, each writing a row
//    while it loads its next);
//  - chunked (GPUs): rows beyond team scratch, or too few rows to fill the device, cut into chunks of team
//    scratch, one team per chunk, joined within one kernel (softfuse_row_chunks.hpp): read from memory once,
//    for rows of at most one chunk per multiprocessor, mostly held in team scratch;
//  - split (GPUs: longer rows, and rows too few for the chunks to fill the device; host CPUs: too few rows for
//    every thread): each row cut into chunks over several teams; a statistics pass writes a partial
//    (max, sum) per chunk, a write pass combines the row's partials and writes its chunk. Rows go in groups
//    small enough that the write pass reads the group back from cache (GPU L2, CPU core caches), except long
//    rows on GPUs, all in one group.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "softfuse_host_stream_store.hpp"

namespace softfuse {
namespace Impl {

template <class ExecSpace>
KOKKOS_INLINE_FUNCTION constexpr bool is_host_space() {
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible;
}

/// Elements a thread takes at a time in the row passes. On GPUs: rows and chunks held in team scratch or
/// registers with 16 interleaved loads in flight per thread, 8 in the split regime (`Split`: its teams spend
/// their time in joins rather than loads; 16 and 32 measured slower there, docs/portable_path.md); a whole
/// team streaming an uncached row (TeamSoftmax without a cache) with 1 per thread in wide teams. On host CPUs
/// a run of consecutive elements the compiler vectorizes.
template <class ExecSpace, bool Cached, bool Split = false>
KOKKOS_INLINE_FUNCTION constexpr int row_block_size() {
  return is_host_space<ExecSpace>() ? 64 : (Cached ? (Split ? 8 : 16) : 1);
}
template <class ExecSpace>
KOKKOS_INLINE_FUNCTION constexpr bool row_blocks_interleaved() {
  return !is_host_space<ExecSpace>();
}

/// How the row passes cut a row of n elements into blocks of at most B elements, handed to `workers`
/// cooperating threads or vector lanes: lane r takes the blocks starting at begin(r), begin(r) + step(), …
/// < n, and block j0 holds j0 + l * spacing() for l < length(j0). Interleaved (GPUs): spacing() = workers,
/// so every load instruction of a warp is coalesced. Contiguous (CPUs): each lane has one run of B
/// consecutive elements (spacing() = 1 at compile time), which the compiler vectorizes.
/// No division on the per-block path (64-bit division costs GPUs dozens of instructions).
/// Lanes > 0: the workers are Lanes at compile time (interleaved), so a block's addresses are one base and
/// constant offsets (no address arithmetic per element).
template <int B, bool Interleaved, int Lanes = 0>
struct RowBlocks {
  std::int64_t n, workers;

  KOKKOS_INLINE_FUNCTION RowBlocks(std::int64_t n_, std::int64_t workers_) : n(n_), workers(Lanes ? Lanes : workers_) {}
  KOKKOS_INLINE_FUNCTION std::int64_t spacing() const { return Interleaved ? (Lanes ? Lanes : workers) : 1; }
  KOKKOS_INLINE_FUNCTION std::int64_t lanes() const { return Interleaved ? spacing() : (n + B - 1) / B; }
  KOKKOS_INLINE_FUNCTION std::int64_t begin(std::int64_t lane) const { return Interleaved ? lane : lane * B; }
  KOKKOS_INLINE_FUNCTION std::int64_t step() const { return Interleaved ? B * spacing() : n; }
  KOKKOS_INLINE_FUNCTION int length(std::int64_t j0) const {
    if (j0 + (B - 1) * spacing() < n) return B;
    return static_cast<int>((n - j0 + spacing() - 1) / spacing());
  }
};

/// Whether teams resident on the device keep running while others of the same kernel wait for them (what
/// the chunked regime's join needs): CUDA and HIP schedule resident thread blocks independently; elsewhere
/// (SYCL, OpenMP target, host backends) nothing promises it, and rows take the split regime instead.
template <class ExecSpace>
constexpr bool resident_teams_progress() {
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) return true;
#endif
#if defined(KOKKOS_ENABLE_HIP) && KOKKOS_VERSION >= 40000
  if constexpr (std::is_same<ExecSpace, Kokkos::HIP>::value) return true;
#elif defined(KOKKOS_ENABLE_HIP)
  if constexpr (std::is_same<ExecSpace, Kokkos::Experimental::HIP>::value) return true;
#endif
  return false;
}

/// Whether holding a row in team scratch saves a memory pass: on GPUs yes; on CPUs the second read of a
/// row already hits the cache, and scratch only adds a copy.
template <class ExecSpace>
KOKKOS_INLINE_FUNCTION constexpr bool row_cache_pays() {
  return !is_host_space<ExecSpace>();
}

// Tunables, in units of what Kokkos reports. Rows of a split group: at most kGpuGroupBytesPerThread bytes per
// unit of concurrency (GPUs: a resident thread, so a group is a fraction of an L2) or kHostGroupBytesPerThread
// (host CPUs: a core, so a group stays in the cores' own caches). Packed rows on GPUs: at most
// kPackedElementsPerLane per lane. Chunked rows: at most one chunk per kGpuThreadsPerMultiprocessor units of
// concurrency, i.e. per multiprocessor (Kokkos' concurrency is multiprocessors x resident threads, at most
// 2048 of them on NVIDIA and AMD GPUs), each of which holds at least one chunk's team.
constexpr std::size_t kGpuGroupBytesPerThread  = 96;
constexpr std::size_t kHostGroupBytesPerThread = std::size_t(1) << 18;
// host CPUs: the least buffer a thread may hold a row in (within a core's L2), and the rows a thread takes
// at a time (at least this many bytes)
constexpr std::size_t kHostRowBufferBytes     = std::size_t(1) << 19;
constexpr std::size_t kHostBlockBytes         = std::size_t(1) << 18;
constexpr std::int64_t kPackedElementsPerLane = 64;
constexpr int kGpuPackedThreads               = 128;  // threads of a packed team on GPUs
constexpr int kGpuRowThreads                  = 256;  // threads of a team, chunked or split team on GPUs
constexpr int kGpuHeldRowThreads              = 512;  // threads of a team holding a row (team regime, GPUs)
// chunks held in team scratch: at most this many bytes (GPUs; H100, 227 KiB of shared memory per multiprocessor:
// two teams of 256 threads per multiprocessor)
constexpr std::size_t kGpuChunkBytes = std::size_t(104) << 10;
constexpr int kGpuSplitWaves         = 2;  // split teams per group: this many times what fills the GPU
// long rows split in one group (GPUs): this many times the teams that fill the GPU, where chunks keep at least
// kGpuLongSplitChunk elements
constexpr int kGpuLongSplitWaves                    = 8;
constexpr std::int64_t kGpuLongSplitChunk           = 16384;
constexpr std::int64_t kGpuThreadsPerMultiprocessor = 2048;
// threads of a team streaming an uncached row (the distributed row passes)
constexpr int kGpuStreamThreads = 1024;
// rows of at most this many elements are staged (GPUs): a team's rows move through team scratch as one range
constexpr std::int64_t kStagedMaxCols = 64;
// rows of a staged team (H200, in runs with 16 in flight: 4194304 x 32 93.4 / 92.7 % of copy against 91.9 / 91.4 % with
// 128, timed alternately; plan sweeps: 1-1.5 points ahead of 128 at 16 to 64 columns)
constexpr int kStagedThreads = 64;
// staged rows moved in runs of kRowVectorBytes take 16 elements in flight per thread (H200, plans of 128 rows per
// team, against 8: 16, 32, 40, 48, 56 and 64 columns 82, 92, 88, 92, 90 and 90 % of copy against 72, 85, 84, 83, 78
// and 76 %); moved element by element, rows of this many elements take 16, all others 8 (H200: 64 columns 84 %
// against 74 %; 56, 48 and 40 columns 59, 68 and 53 % against 75, 78 and 74 %; 32 columns 77 % against 80 %. H100,
// 32 columns: 92 % with 8 against 79 % with 4)
constexpr int kStagedRunLoads               = 16;
constexpr std::int64_t kStagedWideLoadsCols = 64;

/// The multiprocessors of a GPU by Kokkos' concurrency (multiprocessors x resident threads, at most
/// kGpuThreadsPerMultiprocessor of them on NVIDIA and AMD GPUs).
inline std::int64_t gpu_multiprocessors(const std::int64_t concurrency) {
  return std::max<std::int64_t>(1, concurrency / kGpuThreadsPerMultiprocessor);
}

/// A staged row's place in team scratch: an odd number of elements, so the rows that the threads of a warp
/// read lie in different banks.
KOKKOS_INLINE_FUNCTION constexpr std::int64_t staged_stride(const std::int64_t cols) { return cols | 1; }
/// Team scratch of a staged team (elements): its rows, then one output factor per row.
KOKKOS_INLINE_FUNCTION constexpr std::int64_t staged_scratch(const std::int64_t team, const std::int64_t cols) {
  return team * (staged_stride(cols) + 1);
}

/// The team size to launch: the plan's, within what the backend allows for the functor (`max_team`),
/// rounded down to a power of two. team_size_max can be any count of warps (a functor with more registers,
/// e.g. for strided Views, gets 768 where a lighter one gets 1024), and the interleaved blocks and team
/// reductions are only written for, and only measured with, powers of two.
inline int launch_team_size(int planned, int max_team) {
  int team = 1;
  while (2 * team <= planned && 2 * team <= max_team) team *= 2;
  return team;
}

enum class RowRegime { packed, team, chunked, split };

/// A row (or a thread's row buffer on hosts) held in team scratch.
template <class ExecSpace, class T>
using row_cache_t = Kokkos::View<T*, typename ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

struct RowPlan {
  RowRegime regime   = RowRegime::packed;
  int team_size      = 1;                       // packed: rows per team; team, split: threads per team
  int vector_length  = 1;                       // packed: lanes per row
  bool cached        = false;                   // packed, team, chunked: rows (chunks) held in team scratch
  std::int64_t chunk = 0, chunks = 1;           // chunked, split: elements per chunk, chunks per row;
                                                // host packed: a thread's buffer (0: y itself)
  std::int64_t cached_chunk = 0;                // chunked: elements of a chunk held in team scratch (its first ones)
  std::int64_t group_rows   = 0;                // split: rows per group; host packed: rows a thread takes at a time
  bool stream               = false;            // host packed: y written with streaming stores
  bool staged               = false;            // packed (GPUs): rows staged in team scratch by flat loads and stores
  bool staged_runs          = true;             // staged: memory accessed in runs of 16 bytes where the Views allow it
  int staged_run_loads      = kStagedRunLoads;  // staged in runs: elements in flight per thread (8 or 16)
  int staged_loads          = 8;                // staged element by element: elements in flight per thread (8 or 16)
  std::int64_t rolling      = 0;                // team (GPUs): this many persistent teams, each writing a row while it
                                                // loads its next (0: a team per row)
};

/// Chunked: chunks of at most `held` elements (what team scratch holds; 0: nothing held) and at least one
/// multiple of `unit`, enough of them to give the device `fill` teams, at most `max_chunks` per row.
inline RowPlan plan_chunked(std::int64_t rows, std::int64_t cols, int team_size, std::int64_t unit, std::int64_t held,
                            std::int64_t fill, std::int64_t max_chunks) {
  RowPlan plan;
  plan.regime         = RowRegime::chunked;
  plan.team_size      = team_size;
  std::int64_t chunks = held > 0 ? (cols + held - 1) / held : 1;
  chunks = std::min({std::max(chunks, (fill + rows - 1) / rows), std::max<std::int64_t>(1, cols / unit), max_chunks});
  plan.chunk        = ((cols + chunks - 1) / chunks + unit - 1) / unit * unit;
  plan.chunks       = (cols + plan.chunk - 1) / plan.chunk;
  plan.cached_chunk = std::min(plan.chunk, held);
  plan.cached       = held > 0;
  return plan;
}

/// Split: groups of whole rows of at most `group_elems` elements, `teams` chunks of at least `unit` elements
/// per group.
inline RowPlan plan_split(std::int64_t rows, std::int64_t cols, int team_size, std::int64_t unit,
                          std::int64_t group_elems, std::int64_t teams) {
  RowPlan plan;
  plan.regime                = RowRegime::split;
  plan.team_size             = team_size;
  plan.group_rows            = std::min(rows, std::max<std::int64_t>(1, group_elems / cols));
  const std::int64_t per_row = std::max<std::int64_t>(1, teams / plan.group_rows);
  std::int64_t chunk         = (cols + per_row - 1) / per_row;
  plan.chunk                 = std::max(unit, (chunk + unit - 1) / unit * unit);
  plan.chunks                = (cols + plan.chunk - 1) / plan.chunk;
  return plan;
}

/// The most elements of a multiple of `unit` that team scratch holds (`scratch_bytes(n)`: what n take).
template <class ScratchBytes>
std::int64_t scratch_elements(std::size_t scratch_max, std::size_t elem_bytes, std::int64_t unit,
                              const ScratchBytes& scratch_bytes) {
  std::int64_t held = static_cast<std::int64_t>(scratch_max / elem_bytes) / unit * unit;
  while (held > 0 && scratch_bytes(held) > scratch_max) held -= unit;
  return held;
}

/// The elements of a chunk the chunked regime holds in team scratch (GPUs): what teams of kGpuRowThreads hold
/// within kGpuChunkBytes.
template <class ScratchBytes>
std::int64_t chunk_held_elements(std::size_t scratch_max, std::size_t elem_bytes, const ScratchBytes& scratch_bytes) {
  return scratch_elements(std::min(scratch_max, kGpuChunkBytes), elem_bytes, kGpuRowThreads, scratch_bytes);
}

/// The regime and team shape for rows x cols elements of `elem_bytes` bytes on `space`; `cache` allows
/// holding rows in team scratch (`scratch_bytes(n)`: the scratch n elements take).
template <class ExecSpace, class ScratchBytes>
RowPlan plan_rows(const ExecSpace& space, std::int64_t rows, std::int64_t cols, std::size_t elem_bytes, bool cache,
                  const ScratchBytes& scratch_bytes) {
  using policy_type              = Kokkos::TeamPolicy<ExecSpace>;
  const std::int64_t concurrency = std::max(1, space.concurrency());
  const std::size_t scratch_max  = static_cast<std::size_t>(policy_type(space, 1, 1).scratch_size_max(0));
  constexpr bool host            = is_host_space<ExecSpace>();
  RowPlan plan;
  if (host) {
    // One thread per row while there are rows for every thread: one parallel region, no barrier, blocks of
    // rows of kHostBlockBytes per thread at a time. Where x and y go beyond the last-level cache, a row that
    // fits its thread's buffer (a share of that cache) is written once with streaming stores; elsewhere y is
    // the buffer (perf/bench/portable_plans_bench.cpp, docs/host_path.md).
    if (rows >= concurrency) {
      const std::size_t llc = host_last_level_cache_bytes(), row_bytes = static_cast<std::size_t>(cols) * elem_bytes;
      const std::size_t held = std::min<std::size_t>(std::max(kHostRowBufferBytes, llc / concurrency / 4),
                                                     policy_type(space, 1, 1).scratch_size_max(1));
      plan.regime            = RowRegime::packed;
      plan.stream            = 2 * row_bytes * static_cast<std::size_t>(rows) >= llc && row_bytes <= held;
      plan.chunk             = plan.stream ? cols : 0;
      plan.group_rows        = static_cast<std::int64_t>(std::max<std::size_t>(1, kHostBlockBytes / row_bytes));
      return plan;
    }
  } else {
    // Staged: short rows, one per team thread, moved through team scratch by the whole team (coalesced where
    // rows are contiguous), kStagedThreads rows per team or as many as scratch holds (H100: rows of 16, 32
    // and 64 at 61-67 % of copy against 38-40 % over vector lanes; teams of 64 or 128 ahead of 256).
    if (cache && cols <= kStagedMaxCols) {
      int team = kStagedThreads;
      while (team > 32 && scratch_bytes(staged_scratch(team, cols)) > scratch_max) team /= 2;
      if (scratch_bytes(staged_scratch(team, cols)) <= scratch_max) {
        plan.regime       = RowRegime::packed;
        plan.staged       = true;
        plan.staged_loads = cols == kStagedWideLoadsCols ? 16 : 8;
        plan.cached       = true;
        plan.team_size    = team;
        return plan;
      }
    }
    // Packed: lanes enough for 8 elements each, at most 16 (a row costs a vector reduction per lane level).
    const std::int64_t max_lanes = std::min<std::int64_t>(policy_type::vector_length_max(), 16);
    if (cols <= max_lanes * kPackedElementsPerLane) {
      std::int64_t lanes = 1;
      while (lanes < max_lanes && lanes * 8 < cols) lanes *= 2;
      plan.regime        = RowRegime::packed;
      plan.vector_length = static_cast<int>(lanes);
      plan.team_size     = static_cast<int>(kGpuPackedThreads / lanes);
      plan.cached        = cache && scratch_bytes(plan.team_size * cols) <= scratch_max;
      return plan;
    }
    // Team: one team per cached row, 64 elements per thread (128 to 512 threads), where the rows alone fill
    // the GPU about twice over (H100, rows held as exponentials: 32768 x 8192 98 % of copy with 128 threads,
    // 85-91 % with 256; 8192 x 32768 83 % with 512 or 1024, 72 % with 256; 16384 x 4096 96 % with 128).
    if (cache && scratch_bytes(cols) <= scratch_max && rows * kGpuRowThreads * 2 >= concurrency) {
      plan.regime    = RowRegime::team;
      plan.cached    = true;
      std::int64_t t = 128;
      while (t < kGpuHeldRowThreads && t * 64 < cols) t *= 2;
      // rows too few to fill the device with such teams: wider teams while the rows' threads still fit the device at
      // once, down to one block of loads per thread (H100, 1024 x 8192: 98 % of copy with 256 against 90 % with 128)
      while (t < kGpuHeldRowThreads && rows * 2 * t <= concurrency && 2 * t * row_block_size<ExecSpace, true>() <= cols)
        t *= 2;
      plan.team_size = static_cast<int>(t);
      // rows of which team scratch holds one per multiprocessor, more of them than multiprocessors: one persistent
      // team per multiprocessor, writing each row while it loads its next
      if (t == kGpuHeldRowThreads && 2 * scratch_bytes(cols) > scratch_max && rows > gpu_multiprocessors(concurrency))
        plan.rolling = gpu_multiprocessors(concurrency);
      return plan;
    }
    // Chunked where the chunks (at most one per multiprocessor per row) fill the device; a chunk beyond team
    // scratch holds its first part and streams the rest twice. Chunks hold at most kGpuChunkBytes (H100, % of
    // copy, chunks of 26368 / 13312 / 49152 floats: 4096 x 393216 68 / 67 / 62 %, 256 x 2M 63 / 57 / 53 %; H200,
    // chunks of 104 / 72 / 52 KiB on two / three / four teams per multiprocessor: 4096 x 393216 67 / 62 / 56 %).
    // Long rows, of whose chunks team scratch would hold less than half, are split in one group of all rows
    // (32 x 8M 58 % either way, one row of 33M columns 45 % split, 36-41 % chunked;
    // perf/bench/portable_plans_bench.cpp). Their chunks: kGpuLongSplitWaves times the teams that fill the device
    // where that leaves chunks of kGpuLongSplitChunk elements or more (chunks of 4096: 28 % on 1 x 33M), else
    // kGpuSplitWaves times. Other rows too few for their chunks to fill the device are split in groups.
    const std::int64_t held       = cache ? chunk_held_elements(scratch_max, elem_bytes, scratch_bytes) : 0;
    const std::int64_t max_chunks = gpu_multiprocessors(concurrency);
    const std::int64_t teams      = std::max<std::int64_t>(1, concurrency / kGpuRowThreads);
    const std::int64_t unit       = 2 * kGpuRowThreads * row_block_size<ExecSpace, true, true>();
    const RowPlan chunked         = plan_chunked(rows, cols, kGpuRowThreads, kGpuRowThreads, held, teams, max_chunks);
    if (cache && chunked.chunk > 2 * held) {
      const RowPlan wide = plan_split(rows, cols, kGpuRowThreads, unit, rows * cols, kGpuLongSplitWaves * teams);
      if (wide.chunk >= kGpuLongSplitChunk) return wide;
      return plan_split(rows, cols, kGpuRowThreads, unit, rows * cols, kGpuSplitWaves * teams);
    }
    if (resident_teams_progress<ExecSpace>() && rows * chunked.chunks * kGpuRowThreads >= concurrency) return chunked;
    return plan_split(rows, cols, kGpuRowThreads, unit,
                      concurrency * static_cast<std::int64_t>(kGpuGroupBytesPerThread / elem_bytes),
                      kGpuSplitWaves * teams);
  }
  // Split (host): groups of whole rows within the cores' caches, one chunk per thread.
  return plan_split(rows, cols, 1, 2 * row_block_size<ExecSpace, true, true>(),
                    concurrency * static_cast<std::int64_t>(kHostGroupBytesPerThread / elem_bytes), concurrency);
}

}  // namespace Impl
}  // namespace softfuse

#endif
