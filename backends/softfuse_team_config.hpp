#ifndef SOFTFUSE_BACKENDS_TEAM_CONFIG_HPP
#define SOFTFUSE_BACKENDS_TEAM_CONFIG_HPP

// How the portable row kernels shape their teams on each kind of backend. One team owns one row.
//  - GPU-like spaces (memory not host-accessible: Cuda, HIP, SYCL): enough threads that each keeps
//    several loads in flight, up to the backend's maximum; rows held in team scratch when they fit.
//  - Host spaces (Serial, OpenMP, Threads): one thread per row while there are more rows than
//    threads, so rows never pay for team barriers; wide teams only when rows are few.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>

namespace softfuse {
namespace Impl {

template <class ExecSpace>
constexpr bool is_host_space() {
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible;
}

/// Elements a thread takes at a time in the row passes. On GPUs (measured on the H100, see
/// perf/results): rows held in team scratch run best with 8 interleaved loads per thread in teams of
/// at most 256; rows streamed twice from memory with 1 per thread in teams of 1024. On host CPUs a
/// run of consecutive elements that the compiler vectorizes.
template <class ExecSpace, bool Cached>
constexpr int row_block_size() {
  return is_host_space<ExecSpace>() ? 64 : (Cached ? 8 : 1);
}
template <class ExecSpace>
constexpr int row_team_cap(bool cached) {
  return is_host_space<ExecSpace>() ? 1 << 30 : (cached ? 256 : 1024);
}
template <class ExecSpace>
constexpr bool row_blocks_interleaved() {
  return !is_host_space<ExecSpace>();
}

/// How the row passes cut a row of n elements into blocks of at most B elements, handed to
/// lanes() team threads: lane r takes the blocks starting at begin(r), begin(r) + step(), … < n, and
/// block j0 holds j0 + l * spacing() for l < length(j0). Interleaved (GPUs): spacing() = team size,
/// so every load instruction of a warp is coalesced. Contiguous (CPUs): each lane has one run of B
/// consecutive elements (spacing() = 1 at compile time), which the compiler vectorizes.
/// No division on the per-block path (64-bit division costs GPUs dozens of instructions).
template <int B, bool Interleaved>
struct RowBlocks {
  std::int64_t n, team_size;

  KOKKOS_INLINE_FUNCTION RowBlocks(std::int64_t n_, std::int64_t team_size_) : n(n_), team_size(team_size_) {}
  KOKKOS_INLINE_FUNCTION std::int64_t spacing() const { return Interleaved ? team_size : 1; }
  KOKKOS_INLINE_FUNCTION std::int64_t lanes() const { return Interleaved ? team_size : (n + B - 1) / B; }
  KOKKOS_INLINE_FUNCTION std::int64_t begin(std::int64_t lane) const { return Interleaved ? lane : lane * B; }
  KOKKOS_INLINE_FUNCTION std::int64_t step() const { return Interleaved ? B * team_size : n; }
  KOKKOS_INLINE_FUNCTION int length(std::int64_t j0) const {
    if (j0 + (B - 1) * spacing() < n) return B;
    return static_cast<int>((n - j0 + spacing() - 1) / spacing());
  }
};

/// Whether holding a row in team scratch saves a memory pass: on GPUs yes; on CPUs the second read
/// of a row already hits the cache, and scratch only adds a copy.
template <class ExecSpace>
constexpr bool row_cache_pays() {
  return !is_host_space<ExecSpace>();
}

/// Team size for a row kernel over `rows` rows of `cols` elements, `max_team` being what the
/// backend allows for the functor, `cached` whether rows are held in team scratch.
template <class ExecSpace>
int row_team_size(const ExecSpace& space, std::int64_t rows, std::int64_t cols, int max_team, bool cached) {
  if (is_host_space<ExecSpace>()) {
    const std::int64_t threads = space.concurrency();
    if (rows >= threads || cols < 4096) return 1;
    return static_cast<int>(std::min<std::int64_t>(max_team, threads / std::max<std::int64_t>(rows, 1)));
  }
  // About eight elements per thread, a whole number of warps, at least two warps.
  const std::int64_t cap = std::min<std::int64_t>(max_team, row_team_cap<ExecSpace>(cached));
  std::int64_t t = 64;
  while (t < cap && t * 8 < cols) t *= 2;
  return static_cast<int>(std::min<std::int64_t>(t, cap));
}

}  // namespace Impl
}  // namespace softfuse

#endif
