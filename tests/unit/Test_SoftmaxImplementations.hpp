// Every softmax implementation a backend has — portable always, the backend's specialization where
// one exists (the CUDA kernels) — at the row lengths where the CUDA kernels change regime (each
// threshold ±1; on the H100: one block up to 57344 floats, chunk streams of the short shape up to
// 393216 and of the long one up to 2.7M, the split path beyond), against the double reference.
// Include after backends/Test_<Backend>.hpp.

#include "Test_Softmax_Common.hpp"

namespace Test {

template <class T>
void run_regime_boundaries(softfuse::Implementation impl) {
  const std::size_t cols[] = {1,     2,     3,     31,    32,    33,    63,     64,     65,     127,
                              128,   129,   255,   256,   257,   1023,  1024,   1025,   2047,   2048,
                              2049,  4095,  4096,  4097,  8191,  8192,  8193,   16383,  16384,  16385,
                              24575, 24576, 24577, 32767, 32768, 32769, 57343,  57344,  57345,  65535,
                              65536,  65537,  131071, 131072, 131073, 393215, 393216, 393217, 917505, 1048576,
                              1179648, 1179649, 2097152, 3000000};
  std::uint64_t seed = 1000;
  for (std::size_t c : cols) {
    const std::size_t rows = c <= 4096 ? 37 : (c <= 65537 ? 5 : 2);
    run_case<T, Kokkos::LayoutRight>(rows, c, random_values<T>(rows * c, -20.0, 20.0, seed++), false, impl);
    run_case<T, Kokkos::LayoutRight>(rows, c, random_values<T>(rows * c, 0.0, 1.0, seed++), true, impl);
  }
}

constexpr bool has_specialization() {
#ifdef SOFTFUSE_HAVE_CUDA_SPECIALIZED
  return std::is_same<TestExecSpace, Kokkos::Cuda>::value;
#else
  return false;
#endif
}

TEST_F(TestCategory, softmax_regime_boundaries_portable_float) {
  run_regime_boundaries<float>(softfuse::Implementation::portable);
}
TEST_F(TestCategory, softmax_regime_boundaries_specialized_float) {
  if (!has_specialization()) GTEST_SKIP() << "no backend specialization on " << TestExecSpace::name();
  run_regime_boundaries<float>(softfuse::Implementation::specialized);
}
TEST_F(TestCategory, softmax_regime_boundaries_specialized_double) {
  if (!has_specialization()) GTEST_SKIP() << "no backend specialization on " << TestExecSpace::name();
  run_regime_boundaries<double>(softfuse::Implementation::specialized);
}

// The specialized kernels keep the portable path's semantics for special values, layouts they take
// (padded rows) and in place.
TEST_F(TestCategory, softmax_special_values_specialized) {
  if (!has_specialization()) GTEST_SKIP() << "no backend specialization on " << TestExecSpace::name();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t cols : {std::size_t(1), std::size_t(33), std::size_t(5000), std::size_t(70001),
                           std::size_t(393216), std::size_t(1179649)}) {
    const std::size_t rows = 6;
    auto v = random_values<float>(rows * cols, -5.0, 5.0, cols);
    auto row = [&](std::size_t i) { return v.begin() + i * cols; };
    row(0)[cols / 2] = nan;
    row(1)[cols - 1] = inf;
    std::fill(row(2), row(3), -inf);
    row(3)[0] = -inf;
    for (std::size_t j = 0; j < cols; ++j) row(4)[j] = j % 2 ? 1e30f : -1e30f;
    for (bool in_place : {false, true})
      run_case<float, Kokkos::LayoutRight>(rows, cols, v, in_place, softfuse::Implementation::specialized);
  }
}

}  // namespace Test
