#ifndef SOFTFUSE_PERF_BENCH_TIMING_HPP
#define SOFTFUSE_PERF_BENCH_TIMING_HPP

// Medians of fenced runs: the timing shared by the benchmarks and the softfuse program; on CUDA also medians
// of CUDA-event times around back-to-back calls, the reference framework's timing.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <vector>

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

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

#ifdef KOKKOS_ENABLE_CUDA
/// Median of CUDA-event times around each of `reps` calls of f on `space`'s stream, issued back to back
/// without a fence (after 5 warm-ups): what perf/torch_baseline/softmax_torch.py measures for torch. The host's
/// cost per call overlaps the device's work here, where the fenced median adds it.
template <class F>
double event_median_seconds(const Kokkos::Cuda& space, int reps, F&& f) {
  for (int r = 0; r < 5; ++r) f();
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto& e : ev) cudaEventCreate(&e);
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(ev[2 * r], space.cuda_stream());
    f();
    cudaEventRecord(ev[2 * r + 1], space.cuda_stream());
  }
  space.fence();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    float ms = 0;
    cudaEventElapsedTime(&ms, ev[2 * r], ev[2 * r + 1]);
    t.push_back(ms * 1e-3);
  }
  for (auto& e : ev) cudaEventDestroy(e);
  return median(t);
}
#endif

}  // namespace softfuse_bench

#endif
