#ifndef SOFTFUSE_PERF_BENCH_TIMING_HPP
#define SOFTFUSE_PERF_BENCH_TIMING_HPP

// Medians of fenced runs: the timing shared by the benchmarks and the softfuse program.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <vector>

namespace softfuse_bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Median wall time of `reps` runs of f, each fenced on `space`.
template <class Space, class F>
double median_seconds(const Space& space, int reps, F&& f) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    Kokkos::Timer timer;
    f();
    space.fence();
    t.push_back(timer.seconds());
  }
  return median(t);
}

}  // namespace softfuse_bench

#endif
