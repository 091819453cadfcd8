#ifndef SOFTFUSE_PERF_BENCH_CONTEXT_HPP
#define SOFTFUSE_PERF_BENCH_CONTEXT_HPP

// What every softfuse benchmark shares: medians of fenced runs, the bandwidth counters, and the run
// context (Kokkos configuration, device) written into the JSON.

#include <Kokkos_Core.hpp>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

#include "bench_timing.hpp"

namespace softfuse_bench {

inline bool device_is_gpu() {
  return !Kokkos::SpaceAccessibility<Kokkos::HostSpace, Kokkos::DefaultExecutionSpace::memory_space>::accessible;
}

/// Median wall time of `reps` fenced runs of f, after one warm-up run.
template <class Space, class F>
double warm_median_seconds(const Space& space, int reps, F&& f) {
  f();
  space.fence();
  return median_seconds(space, reps, f);
}

/// Counters from per-iteration times: median ms, GB/s at the median, the same-run copy's GB/s and
/// the ratio (1.0 = copy speed).
inline void report_bandwidth(benchmark::State& state, const std::vector<double>& times, double bytes,
                             double copy_seconds) {
  const double t              = median(times);
  state.counters["median_ms"] = t * 1e3;
  state.counters["GB/s"]      = bytes / t * 1e-9;
  state.counters["copy_GB/s"] = bytes / copy_seconds * 1e-9;
  state.counters["of_copy"]   = copy_seconds / t;
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
}

/// Takes `--shapes=AxB[xC],…` out of argv: the dimensions of each shape (empty when not given).
inline std::vector<std::vector<std::int64_t>> take_shapes_flag(int& argc, char** argv) {
  std::vector<std::vector<std::int64_t>> shapes;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--shapes=", 9) != 0) continue;
    std::stringstream list(argv[i] + 9);
    std::string item, dim;
    while (std::getline(list, item, ',')) {
      std::stringstream dims(item);
      shapes.emplace_back();
      while (std::getline(dims, dim, 'x')) shapes.back().push_back(std::stoll(dim));
    }
    for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
    --argc;
    break;
  }
  return shapes;
}

/// The CPU's model name (Linux' /proc/cpuinfo), else "host".
inline std::string host_cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const std::size_t name = line.find_first_not_of(" \t:", std::string("model name").size());
    if (name != std::string::npos) return line.substr(name);
  }
  return "host";
}

inline std::string device_name() {
#ifdef KOKKOS_ENABLE_CUDA
  cudaDeviceProp prop;
  int dev = 0;
  cudaGetDevice(&dev);
  cudaGetDeviceProperties(&prop, dev);
  return prop.name;
#else
  return host_cpu_model();
#endif
}

inline void add_context() {
  benchmark::AddCustomContext("kokkos_version", std::to_string(KOKKOS_VERSION));
  benchmark::AddCustomContext("execution_space", Kokkos::DefaultExecutionSpace::name());
  benchmark::AddCustomContext("concurrency", std::to_string(Kokkos::DefaultExecutionSpace().concurrency()));
  benchmark::AddCustomContext("device", device_name());
}

/// Records the context, then runs the registered benchmarks with Google Benchmark's own flags.
inline void run_registered(int& argc, char** argv) {
  add_context();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}

}  // namespace softfuse_bench

#endif
