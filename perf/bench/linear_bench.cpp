// Google Benchmark for the fused layers: time and TFLOP/s (2 batch in out flops) of linear_batchnorm_softmax
// (training and inference, scalar scale, with a workspace; training also without, allocating per call) and
// linear_gelu_softmax (exact GELU), on GPUs also forced onto the portable path (`_portable`), and
// the layers' GEMM alone (KokkosBlas::gemm as the portable path calls it) on the same shapes and buffers in
// the same run, with the ratio of the two
// (of_gemm: 1.0 = at GEMM speed). A layer's iterations alternate with calls of the GEMM alone on the same
// buffers (not counted in the layer's time), whose median is the layer's gemm_TFLOP/s: both at the same
// clocks and under the same load from other tenants of the machine.
//
//   softfuse_bench_linear [--shapes=1024x8192x8192,256x4096x4096] [google-benchmark flags]
//
// Shapes are batch x in x out. Each benchmark reports the median over its iterations (each fenced).

#include <Kokkos_Core.hpp>
#include <Kokkos_Random.hpp>
#include <benchmark/benchmark.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <softfuse_linear_batchnorm_softmax.hpp>
#include <softfuse_linear_gelu_softmax.hpp>

#include "bench_context.hpp"

namespace {

using Space  = Kokkos::DefaultExecutionSpace;
using Shape  = std::array<std::int64_t, 3>;  // batch, in, out
using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Space>;
using Vector = Kokkos::View<float*, Space>;

std::vector<Shape> default_shapes() {
  if (softfuse_bench::device_is_gpu()) return {{1024, 8192, 8192}};  // shared/WORKLOADS.md
  return {{1024, 8192, 8192}, {256, 4096, 4096}};
}

struct Buffers {
  Matrix x, w, y;
  Vector b, gamma, beta, running_mean, running_var, scale, workspace;
  double gemm_median_s = 0;
};

std::map<Shape, Buffers>& buffer_cache() {
  static std::map<Shape, Buffers> cache;
  return cache;
}

// The GEMM the layers' portable path calls (KokkosBlas::gemm within the backend's GemmScope).
void gemm(const Buffers& b) {
  using softfuse::Impl::exec_view_t;
  softfuse::Impl::linear_gemm(Space(), exec_view_t<Space, Matrix>(b.x), exec_view_t<Space, Matrix>(b.w),
                              exec_view_t<Space, Matrix, false>(b.y));
}

// One set of buffers per shape (x uniform [0, 1), weight and bias within 1/sqrt(in)); the GEMM timed once (the
// GEMM benchmark's reference).
Buffers& buffers(const Shape& s) {
  auto& cache = buffer_cache();
  auto it     = cache.find(s);
  if (it != cache.end()) return it->second;
  cache.clear();  // keep one shape resident at a time
  const std::int64_t batch = s[0], in = s[1], out = s[2];
  Buffers b;
  b.x = Matrix("x", batch, in), b.w = Matrix("w", out, in), b.y = Matrix("y", batch, out);
  b.b = Vector("b", out), b.gamma = Vector("gamma", out), b.beta = Vector("beta", out);
  b.running_mean = Vector("running_mean", out), b.running_var = Vector("running_var", out);
  b.scale = Vector("scale", 1), b.workspace = Vector("workspace", 3 * out);
  Kokkos::Random_XorShift64_Pool<Space> pool(12345);
  const float bound = 1 / std::sqrt(float(in));
  Kokkos::fill_random(b.x, pool, 1.0f);
  Kokkos::fill_random(b.w, pool, -bound, bound);
  Kokkos::fill_random(b.b, pool, -bound, bound);
  Kokkos::fill_random(b.gamma, pool, 0.5f, 1.5f);
  Kokkos::deep_copy(b.running_var, 1.0f);
  Kokkos::deep_copy(b.scale, 1.5f);
  Space space;
  gemm(b);
  b.gemm_median_s = softfuse_bench::warm_median_seconds(space, 10, [&] { gemm(b); });
  return cache.emplace(s, b).first->second;
}

void report(benchmark::State& state, const std::vector<double>& times, const Shape& s, double gemm_seconds) {
  const double t = softfuse_bench::median(times), flops = 2.0 * s[0] * s[1] * s[2];
  state.counters["median_ms"]    = t * 1e3;
  state.counters["TFLOP/s"]      = flops / t * 1e-12;
  state.counters["gemm_TFLOP/s"] = flops / gemm_seconds * 1e-12;
  state.counters["of_gemm"]      = gemm_seconds / t;
}

/// Times f per iteration; `paired`: each iteration also times the GEMM alone first, outside the benchmark's time.
template <class F>
void run(benchmark::State& state, const Shape& s, bool paired, F&& f) {
  auto& b = buffers(s);
  Space space;
  std::vector<double> times, gemm_times;
  for (auto _ : state) {
    if (paired) {
      state.PauseTiming();
      Kokkos::Timer g;
      gemm(b);
      space.fence();
      gemm_times.push_back(g.seconds());
      state.ResumeTiming();
    }
    Kokkos::Timer t;
    f(space, b);
    space.fence();
    times.push_back(t.seconds());
  }
  report(state, times, s, paired ? softfuse_bench::median(gemm_times) : b.gemm_median_s);
}

void bm_gemm(benchmark::State& state, Shape s) {
  run(state, s, false, [](const Space&, const Buffers& b) { gemm(b); });
}

// With a caller's workspace (the fast way), or without (each call allocates and frees one).
void bm_batchnorm(benchmark::State& state, Shape s, softfuse::BatchNormMode mode, bool workspace,
                  softfuse::Implementation impl) {
  run(state, s, true, [=](const Space& space, const Buffers& b) {
    softfuse::BatchNorm<Vector> bn{b.gamma, b.beta, b.running_mean, b.running_var, mode};
    if (workspace) bn.workspace = b.workspace;
    softfuse::linear_batchnorm_softmax(space, b.x, b.w, b.b, bn, b.scale, b.y, impl);
  });
}

void bm_gelu(benchmark::State& state, Shape s, softfuse::Implementation impl) {
  run(state, s, true, [=](const Space& space, const Buffers& b) {
    softfuse::linear_gelu_softmax(space, b.x, b.w, b.b, b.y, softfuse::Gelu::exact, impl);
  });
}

std::vector<Shape> parse_shapes(int& argc, char** argv) {
  std::vector<Shape> shapes;
  for (const auto& d : softfuse_bench::take_shapes_flag(argc, argv)) shapes.push_back({d.at(0), d.at(1), d.at(2)});
  return shapes.empty() ? default_shapes() : shapes;
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::initialize(argc, argv);
  {
    for (const auto& s : parse_shapes(argc, argv)) {
      const std::string name = std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
      const auto add         = [&](const std::string& what, auto&&... args) {
        benchmark::RegisterBenchmark((what + "/" + name).c_str(), args...)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      };
      constexpr auto automatic = softfuse::Implementation::automatic, portable = softfuse::Implementation::portable;
      add("gemm", bm_gemm, s);
      add("linear_batchnorm_softmax_training", bm_batchnorm, s, softfuse::BatchNormMode::training, true, automatic);
      add("linear_batchnorm_softmax_inference", bm_batchnorm, s, softfuse::BatchNormMode::inference, true, automatic);
      add("linear_batchnorm_softmax_training_no_workspace", bm_batchnorm, s, softfuse::BatchNormMode::training, false,
          automatic);
      add("linear_gelu_softmax_exact", bm_gelu, s, automatic);
      if (softfuse_bench::device_is_gpu()) {  // on hosts the portable path is the automatic one
        add("linear_batchnorm_softmax_training_portable", bm_batchnorm, s, softfuse::BatchNormMode::training, true,
            portable);
        add("linear_batchnorm_softmax_inference_portable", bm_batchnorm, s, softfuse::BatchNormMode::inference, true,
            portable);
        add("linear_gelu_softmax_exact_portable", bm_gelu, s, portable);
      }
    }
    softfuse_bench::run_registered(argc, argv);
    buffer_cache().clear();  // Views must go before Kokkos::finalize
  }
  Kokkos::finalize();
  return 0;
}
