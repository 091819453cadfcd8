#ifndef SOFTFUSE_TEST_ROLLING_ROWS_HPP
#define SOFTFUSE_TEST_ROLLING_ROWS_HPP

// A shape whose rows the portable path takes as rolling team rows (GPUs: rows of which team scratch holds one per
// multiprocessor, softfuse_team_config.hpp), for the tests of softmax and of the fused layers' row pass.

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <utility>

#include <softfuse_softmax.hpp>

namespace Test {

/// rows x cols of T taken as rolling team rows on `space`: rows of 3/4 of team scratch, enough of them for the team
/// regime (twice the device's threads in teams of 256) and not a multiple of the teams; {0, 0} where the backend
/// offers no team scratch for such rows (hosts, or at most 120 KiB).
template <class T, class ExecSpace>
std::pair<std::size_t, std::size_t> rolling_rows_shape(const ExecSpace& space) {
  using namespace softfuse::Impl;
  const std::size_t scratch_max = Kokkos::TeamPolicy<ExecSpace>(space, 1, 1).scratch_size_max(0);
  if (is_host_space<ExecSpace>() || scratch_max <= 120 * 1024) return {0, 0};
  return {static_cast<std::size_t>(space.concurrency() / (2 * kGpuRowThreads) + 3), scratch_max / sizeof(T) * 3 / 4};
}

}  // namespace Test

#endif
