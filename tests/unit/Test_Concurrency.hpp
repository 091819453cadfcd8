// Two execution-space instances running softmax and both fused layers at the same time give bit-identical
// results to the same calls run one after the other on the same instances. Written once for every backend:
// include after a backends/Test_<Backend>.hpp.
//
// What "two instances at the same time" can mean differs per backend and Kokkos version:
//  - Cuda: two Kokkos::Cuda instances on two cudaStreams the test creates; the calls are issued from one host
//    thread, one after the other, asynchronously, and run concurrently on the device.
//  - OpenMP: two partitions of the thread pool, each running its calls from its own OpenMP thread: with
//    Kokkos 3.x OpenMP::partition_master (the only way: Kokkos 3.x OpenMP kernels may be launched only from
//    the thread that initialized Kokkos, or from a partition's master thread, and instances cannot be
//    created), with Kokkos 4+ Kokkos::Experimental::partition_space and an OpenMP parallel region of two
//    threads (as Kokkos' own partitioning test does). Both need nested OpenMP, enabled for the test.
//  - Serial: two std::threads, each on its own instance (Kokkos 4+: partition_space; 3.5 to 3.x: Serial's
//    default instance, made thread-safe by kokkos#4053). Kokkos 3.4's Serial backend keeps its team scratch
//    and reduction buffer in one unguarded global (g_serial_thread_team_data): team kernels from two host
//    threads race there, so the test is skipped.
// Each pair is run 3 times concurrently (with a fresh BatchNorm state each time); every output and the running
// statistics must be bitwise those of the sequential run.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <softfuse_linear_batchnorm_softmax.hpp>
#include <softfuse_linear_gelu_softmax.hpp>
#include <softfuse_softmax.hpp>

#include "Test_LinearLayers_Common.hpp"

#if defined(KOKKOS_ENABLE_OPENMP)
#include <omp.h>
#endif
#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime.h>
#endif

namespace TestConcurrency {

using namespace TestLinearLayers;

/// Two instances of Space: run(a, b, concurrent) runs a(instance 0) and b(instance 1), each followed by a fence
/// of its instance, at the same time or one after the other. Primary template: no way to do that here.
template <class Space>
struct InstancePair {
  static const char* unavailable() { return "no concurrent instances of this backend in this test"; }
  template <class A, class B>
  void run(const A&, const B&, bool) const {}
};

#if KOKKOS_VERSION >= 40000
template <class Space>
std::vector<Space> two_partitions() {
  const auto spaces = Kokkos::Experimental::partition_space(Space(), 1, 1);
  return std::vector<Space>(spaces.begin(), spaces.end());
}
#endif

#if defined(KOKKOS_ENABLE_SERIAL)
template <>
struct InstancePair<Kokkos::Serial> {
  static const char* unavailable() {
#if KOKKOS_VERSION < 30500
    return "Kokkos before 3.5 keeps Serial's team scratch in one unguarded global (g_serial_thread_team_data): "
           "Serial kernels from two host threads race there";
#else
    return nullptr;
#endif
  }
#if KOKKOS_VERSION >= 40000
  std::vector<Kokkos::Serial> spaces = two_partitions<Kokkos::Serial>();
#else
  std::vector<Kokkos::Serial> spaces = std::vector<Kokkos::Serial>(2);
#endif
  template <class A, class B>
  void run(const A& a, const B& b, bool concurrent) const {
    const Kokkos::Serial &s0 = spaces[0], &s1 = spaces[1];
    if (!concurrent) {
      a(s0), s0.fence(), b(s1), s1.fence();
      return;
    }
    std::thread t0([&] { a(s0), s0.fence(); }), t1([&] { b(s1), s1.fence(); });
    t0.join(), t1.join();
  }
};
#endif

#if defined(KOKKOS_ENABLE_OPENMP)
/// Nested OpenMP (two active levels) while it lives: partitions are parallel regions inside a parallel region.
struct NestedOpenMP {
  int levels = omp_get_max_active_levels();
  NestedOpenMP() { omp_set_max_active_levels(2); }
  ~NestedOpenMP() { omp_set_max_active_levels(levels); }
};

template <>
struct InstancePair<Kokkos::OpenMP> {
  static const char* unavailable() { return nullptr; }
  NestedOpenMP nested;
#if KOKKOS_VERSION >= 40000
  std::vector<Kokkos::OpenMP> spaces = two_partitions<Kokkos::OpenMP>();

  template <class A, class B>
  void run(const A& a, const B& b, bool concurrent) const {
    const Kokkos::OpenMP &s0 = spaces[0], &s1 = spaces[1];
    if (!concurrent) {
      a(s0), s0.fence(), b(s1), s1.fence();
      return;
    }
#pragma omp parallel num_threads(2)
    {
      if (omp_get_thread_num() == 0) a(s0), s0.fence();
      if (omp_get_thread_num() == 1) b(s1), s1.fence();
    }
  }
#else
  // Each partition's master thread launches on Kokkos::OpenMP(), its own partition (the same partitions every
  // call). One after the other: partition 1 waits until partition 0 is done.
  template <class A, class B>
  void run(const A& a, const B& b, bool concurrent) const {
    std::atomic<int> done{0};
    Kokkos::OpenMP::partition_master(
        [&](int id, int partitions) {
          const Kokkos::OpenMP space;
          if (partitions == 1) {  // no nested OpenMP after all: both here
            a(space), space.fence(), b(space), space.fence();
            return;
          }
          if (id == 1 && !concurrent)
            while (done.load() == 0) std::this_thread::yield();
          if (id == 0) a(space), space.fence(), done.store(1);
          if (id == 1) b(space), space.fence();
        },
        2, 0);
  }
#endif
};
#endif

#if defined(KOKKOS_ENABLE_CUDA)
template <>
struct InstancePair<Kokkos::Cuda> {
  static const char* unavailable() { return nullptr; }
  cudaStream_t streams[2] = {};
  std::vector<Kokkos::Cuda> spaces;

  InstancePair() {
    for (auto& s : streams) EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    spaces = {Kokkos::Cuda(streams[0]), Kokkos::Cuda(streams[1])};
  }
  ~InstancePair() {
    spaces.clear();  // the instances before their streams
    for (auto& s : streams) EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  }
  template <class A, class B>
  void run(const A& a, const B& b, bool concurrent) const {
    const Kokkos::Cuda &s0 = spaces[0], &s1 = spaces[1];
    if (concurrent)  // both issued before either is waited for
      a(s0), b(s1), s0.fence(), s1.fence();
    else
      a(s0), s0.fence(), b(s1), s1.fence();
  }
};
#endif

/// One instance's work: softmax out of place and in place, linear_gelu_softmax, and linear_batchnorm_softmax in
/// training mode (running statistics updated; with or without a caller's workspace) on its own Views.
template <class T>
struct Job {
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, memory_space>;
  using Vector = Kokkos::View<T*, memory_space>;

  Linear<T> lin;
  Matrix sx, sy, s_in_place, x, w, y_gelu, y_bn;
  Vector b, scale;
  softfuse::BatchNorm<Vector> bn;
  std::vector<T> softmax_input, running_mean, running_var;

  Job(std::size_t rows, std::size_t cols, const Linear<T>& l, bool workspace, std::uint64_t seed)
      : lin(l),
        sx(device_matrix(random_values<T>(rows * cols, -20.0, 20.0, seed), rows, cols, "sx")),
        sy("sy", rows, cols),
        s_in_place("s_in_place", rows, cols),
        x(device_matrix(lin.x, lin.batch, lin.in, "x")),
        w(device_matrix(lin.w, lin.out, lin.in, "w")),
        y_gelu("y_gelu", lin.batch, lin.out),
        y_bn("y_bn", lin.batch, lin.out),
        b(device_vector(lin.b, "b")),
        scale(device_vector(random_values<T>(lin.out, 0.5, 3.0, seed + 1), "scale")),
        bn{device_vector(random_values<T>(lin.out, -1.5, 1.5, seed + 2), "gamma"),
           device_vector(random_values<T>(lin.out, -0.5, 0.5, seed + 3), "beta"), Vector("running_mean", lin.out),
           Vector("running_var", lin.out)},
        softmax_input(host_values(sx)),
        running_mean(random_values<T>(lin.out, -0.2, 0.2, seed + 4)),
        running_var(random_values<T>(lin.out, 0.5, 1.5, seed + 5)) {
    if (workspace) bn.workspace = Vector("workspace", 3 * lin.out);
  }

  /// Outputs to a sentinel, the running statistics and the in-place softmax's input to their initial values.
  void reset() const {
    for (const Matrix& m : {sy, y_gelu, y_bn}) Kokkos::deep_copy(m, T(-777));
    Kokkos::deep_copy(s_in_place, sx);
    Kokkos::deep_copy(bn.running_mean, Kokkos::View<const T*, Kokkos::HostSpace>(running_mean.data(), lin.out));
    Kokkos::deep_copy(bn.running_var, Kokkos::View<const T*, Kokkos::HostSpace>(running_var.data(), lin.out));
  }

  template <class Space>
  void operator()(const Space& space) const {
    softfuse::softmax(space, sx, sy);
    softfuse::softmax(space, s_in_place, s_in_place);
    softfuse::linear_gelu_softmax(space, x, w, b, y_gelu);
    softfuse::linear_batchnorm_softmax(space, x, w, b, bn, scale, y_bn);
  }

  /// Every output, and the running statistics.
  std::vector<std::vector<T>> results() const {
    return {host_values(sy),   host_values(s_in_place),      host_values(y_gelu),
            host_values(y_bn), host_values(bn.running_mean), host_values(bn.running_var)};
  }
};

/// How many elements differ in their bits.
template <class T>
std::size_t differing_elements(const std::vector<std::vector<T>>& a, const std::vector<std::vector<T>>& b) {
  std::size_t n = 0;
  for (std::size_t k = 0; k < a.size(); ++k)
    for (std::size_t i = 0; i < a[k].size(); ++i) n += std::memcmp(&a[k][i], &b[k][i], sizeof(T)) != 0;
  return n;
}

template <class T>
std::size_t count_value(const std::vector<std::vector<T>>& outputs, T value) {
  std::size_t n = 0;
  for (const auto& v : outputs) n += std::count(v.begin(), v.end(), value);
  return n;
}

inline void test_two_instances() {
  using Pair = InstancePair<TestExecSpace>;
  if (const char* why = Pair::unavailable()) GTEST_SKIP() << why;
  const Pair pair;
  // Different shapes and value types on the two instances, large enough that the calls overlap. On the H100,
  // instance 0 takes the CUDA kernels (softmax rows of 2 MB: grid groups with the library's workspace pool;
  // the fused layers' cuBLASLt path, BatchNorm with a caller's workspace), instance 1 (double) the portable
  // path, BatchNorm allocating its workspace per call.
  const Job<float> a(8, 524288, Linear<float>(96, 512, 1031, 71), true, 71);
  const Job<double> b(11, 70001, Linear<double>(130, 300, 257, 72), false, 72);
  using clock = std::chrono::steady_clock;
  clock::time_point start, begin_a, end_a, begin_b, end_b;
  // Each job timed from the host, fence included (on GPUs that is when its stream is done).
  const auto job_a = [&](const auto& space) { begin_a = clock::now(), a(space), space.fence(), end_a = clock::now(); };
  const auto job_b = [&](const auto& space) { begin_b = clock::now(), b(space), space.fence(), end_b = clock::now(); };
  const auto ms    = [](clock::duration d) { return std::max(0.0, 1e3 * std::chrono::duration<double>(d).count()); };
  const auto timed = [&](bool concurrent) {
    a.reset(), b.reset();
    start = clock::now();
    pair.run(job_a, job_b, concurrent);
    return ms(clock::now() - start);
  };
  const double sequential_ms = timed(false);
  const auto ref_a           = a.results();
  const auto ref_b           = b.results();
  EXPECT_EQ(count_value(ref_a, -777.0f) + count_value(ref_b, -777.0), 0u) << "outputs left unwritten";
  for (int round = 0; round < 3; ++round) {
    const double concurrent_ms = timed(true);
    EXPECT_EQ(differing_elements(a.results(), ref_a), 0u) << "instance 0 (float), round " << round;
    EXPECT_EQ(differing_elements(b.results(), ref_b), 0u) << "instance 1 (double), round " << round;
    std::printf(
        "    %s, two instances, round %d: one after the other %.1f ms, at the same time %.1f ms "
        "(instance 0: %.1f to %.1f ms, instance 1: %.1f to %.1f ms)\n",
        TestExecSpace::name(), round, sequential_ms, concurrent_ms, ms(begin_a - start), ms(end_a - start),
        ms(begin_b - start), ms(end_b - start));
  }
}

TEST_F(TestCategory, concurrent_instances_bit_identical) { test_two_instances(); }

}  // namespace TestConcurrency
