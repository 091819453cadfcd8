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

/// Consecutive elements a thread takes at a time in the row passes: 1 on GPUs (coalescing), a
/// vectorizable run on host CPUs.
template <class ExecSpace>
constexpr int row_block_size() {
  return is_host_space<ExecSpace>() ? 64 : 1;
}

/// Whether holding a row in team scratch saves a memory pass: on GPUs yes; on CPUs the second read
/// of a row already hits the cache, and scratch only adds a copy.
template <class ExecSpace>
constexpr bool row_cache_pays() {
  return !is_host_space<ExecSpace>();
}

/// Team size for a row kernel over `rows` rows of `cols` elements, `max_team` being what the
/// backend allows for the functor.
template <class ExecSpace>
int row_team_size(const ExecSpace& space, std::int64_t rows, std::int64_t cols, int max_team) {
  if (is_host_space<ExecSpace>()) {
    const std::int64_t threads = space.concurrency();
    if (rows >= threads || cols < 4096) return 1;
    return static_cast<int>(std::min<std::int64_t>(max_team, threads / std::max<std::int64_t>(rows, 1)));
  }
  // About eight elements per thread, a whole number of warps, at least two warps.
  std::int64_t t = 64;
  while (t < max_team && t * 8 < cols) t *= 2;
  return static_cast<int>(std::min<std::int64_t>(t, max_team));
}

}  // namespace Impl
}  // namespace softfuse

#endif
