// Google Benchmark for softfuse::softmax: GB/s (one read and one write of each element counted)
// and, in the same run on the same buffers, the copy's GB/s (Kokkos::deep_copy: the device copy on
// GPUs, a parallel copy on hosts) and the ratio of the two (of_copy: 1.0 = copy speed).
//
//   softfuse_bench_softmax [--host] [--shapes=4096x393216,65536x1024] [google-benchmark flags]
//
// --host times the default host execution space (e.g. OpenMP in a CUDA build) instead of the default one.
// Default shapes: on GPUs the 14 fp32 shapes of the portable-path table (every row-length regime), for
// copy, portable and (where built with the CUDA specialization) specialized; on hosts the three CPU shapes.
// Each benchmark reports the median over its iterations (each fenced), not the mean. On CUDA each also reports
// events_ms and events_of_copy: the median of CUDA events around 30 calls issued back to back (the reference
// framework's timing, perf/torch_baseline/softmax_torch.py), against the copy timed the same way.
// events_end_unix_s (when those calls ended) places each in the clock log of scripts/gpu_run.sh.

#include <Kokkos_Core.hpp>
#include <Kokkos_Random.hpp>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <softfuse_softmax.hpp>

#include "bench_context.hpp"

namespace {

using Shape = std::pair<std::int64_t, std::int64_t>;

std::vector<Shape> default_shapes(bool gpu) {
  if (gpu)
    return {{4096, 393216}, {65536, 1024}, {32768, 8192},  {8192, 32768}, {1024, 8192},
            {128, 1048576}, {16384, 4096}, {2048, 131072}, {512, 524288}, {256, 2097152},
            {32, 8388608},  {1, 33554432}, {4194304, 32},  {100000, 1000}};
  return {{4096, 65536}, {65536, 1024}, {64, 1048576}};
}

template <class Space>
struct Bench {
  using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Space>;
  struct Buffers {
    Matrix x, y;
    double copy_median_s = 0;
    double copy_events_s = 0;  // CUDA: the copy benchmark's latest event median
  };
  static constexpr int kEventReps = 30;

  // On CUDA: the event median of f, and its ratio to the copy's (the copy benchmark's latest, which runs before the
  // softmax benchmarks of its shape), as counters.
  template <class F>
  static void report_events(benchmark::State& state, Buffers& b, bool copy, F&& f) {
#ifdef KOKKOS_ENABLE_CUDA
    if constexpr (std::is_same_v<Space, Kokkos::Cuda>) {
      const double t = softfuse_bench::event_median_seconds(Space(), kEventReps, f);
      if (copy) b.copy_events_s = t;
      state.counters["events_ms"] = t * 1e3;
      if (b.copy_events_s > 0) state.counters["events_of_copy"] = b.copy_events_s / t;
      // when the back-to-back calls ended, to place them in gpu_run.sh's clock log (nvidia-smi's timestamps)
      state.counters["events_end_unix_s"] =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    }
#else
    (void)state;
    (void)b;
    (void)copy;
    (void)f;
#endif
  }

  static std::map<Shape, Buffers>& buffer_cache() {
    static std::map<Shape, Buffers> cache;
    return cache;
  }

  // One pair of buffers per shape, filled with uniform [0, 1) values; the copy timed once on them.
  static Buffers& buffers(const Shape& s) {
    auto& cache = buffer_cache();
    auto it     = cache.find(s);
    if (it != cache.end()) return it->second;
    cache.clear();  // keep one shape resident at a time
    Buffers b;
    b.x = Matrix(Kokkos::view_alloc(Kokkos::WithoutInitializing, "x"), s.first, s.second);
    b.y = Matrix(Kokkos::view_alloc(Kokkos::WithoutInitializing, "y"), s.first, s.second);
    Kokkos::Random_XorShift64_Pool<Space> pool(12345);
    Kokkos::fill_random(b.x, pool, 1.0f);
    Kokkos::deep_copy(b.y, b.x);
    Space space;
    b.copy_median_s = softfuse_bench::warm_median_seconds(space, 20, [&] { Kokkos::deep_copy(space, b.y, b.x); });
    return cache.emplace(s, b).first->second;
  }

  static void copy(benchmark::State& state, Shape s) {
    auto& b = buffers(s);
    Space space;
    std::vector<double> times;
    for (auto _ : state) {
      Kokkos::Timer t;
      Kokkos::deep_copy(space, b.y, b.x);
      space.fence();
      times.push_back(t.seconds());
    }
    softfuse_bench::report_bandwidth(state, times, 2.0 * sizeof(float) * s.first * s.second, b.copy_median_s);
    report_events(state, b, true, [&] { Kokkos::deep_copy(space, b.y, b.x); });
  }

  static void softmax(benchmark::State& state, Shape s, softfuse::Implementation impl) {
    auto& b = buffers(s);
    Space space;
    std::vector<double> times;
    for (auto _ : state) {
      Kokkos::Timer t;
      softfuse::softmax(space, b.x, b.y, impl);
      space.fence();
      times.push_back(t.seconds());
    }
    softfuse_bench::report_bandwidth(state, times, 2.0 * sizeof(float) * s.first * s.second, b.copy_median_s);
    report_events(state, b, false, [&] { softfuse::softmax(space, b.x, b.y, impl); });
  }

  static void register_all(const std::vector<Shape>& shapes, const std::string& prefix) {
    const bool has_specialization = softfuse::Impl::SoftmaxSpecialization<Space, softfuse::Impl::const_view_t<Matrix>,
                                                                          softfuse::Impl::view_t<Matrix>>::exists;
    for (const auto& s : shapes) {
      const std::string name = std::to_string(s.first) + "x" + std::to_string(s.second);
      benchmark::RegisterBenchmark((prefix + "copy/" + name).c_str(), copy, s)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark((prefix + "softmax_portable/" + name).c_str(), softmax, s,
                                   softfuse::Implementation::portable)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
      if (has_specialization)
        benchmark::RegisterBenchmark((prefix + "softmax_specialized/" + name).c_str(), softmax, s,
                                     softfuse::Implementation::specialized)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
    }
  }
};

/// Takes `--host` out of argv: whether it was there.
bool take_host_flag(int& argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) != "--host") continue;
    for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
    --argc;
    return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::initialize(argc, argv);
  {
    const bool host = take_host_flag(argc, argv);
    std::vector<Shape> shapes;
    for (const auto& d : softfuse_bench::take_shapes_flag(argc, argv)) shapes.emplace_back(d.at(0), d.at(1));
    if (host) {
      Bench<Kokkos::DefaultHostExecutionSpace>::register_all(shapes.empty() ? default_shapes(false) : shapes, "host_");
    } else {
      Bench<Kokkos::DefaultExecutionSpace>::register_all(
          shapes.empty() ? default_shapes(softfuse_bench::device_is_gpu()) : shapes, "");
    }
    softfuse_bench::run_registered(argc, argv);
    // Views must go before Kokkos::finalize
    Bench<Kokkos::DefaultHostExecutionSpace>::buffer_cache().clear();
    Bench<Kokkos::DefaultExecutionSpace>::buffer_cache().clear();
  }
  Kokkos::finalize();
  return 0;
}
