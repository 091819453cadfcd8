// Every softmax implementation a backend has — portable always, the backend's specialization where
// one exists (the CUDA kernels) — at the row lengths where the CUDA kernels change regime (each
// threshold ±1; on the H100: one block up to 57344 floats, chunk streams of the short shape up to
// 393216 and of the long one up to 2.7M, the split path beyond), against the double reference.
// Include after backends/Test_<Backend>.hpp.

#include <softfuse_linear_batchnorm_softmax.hpp>
#include <softfuse_linear_gelu_softmax.hpp>

#include <set>
#include <utility>
#include <vector>

#include "Test_RollingRows.hpp"
#include "Test_Softmax_Common.hpp"

namespace Test {

template <class T>
void run_regime_boundaries(softfuse::Implementation impl) {
  const std::size_t cols[] = {
      1,      2,      3,      31,     32,     33,     63,     64,      65,      127,     128,     129,    255,   256,
      257,    1023,   1024,   1025,   2047,   2048,   2049,   4095,    4096,    4097,    8191,    8192,   8193,  16383,
      16384,  16385,  24575,  24576,  24577,  32767,  32768,  32769,   57343,   57344,   57345,   65535,  65536, 65537,
      131071, 131072, 131073, 393215, 393216, 393217, 917505, 1048576, 1179648, 1179649, 2097152, 3000000};
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

// Short rows over several teams of the packed regime (GPUs: staged through team scratch; each team's rows one run of
// memory in LayoutRight, moved in 16-byte accesses, 16 elements in flight per thread, where the rows are whole runs
// and aligned, element by element, 8 in flight or 16 for rows of 64 columns, where they start 4 bytes past that;
// strided in LayoutLeft and LayoutStride; team sizes that are and are not multiples of the row; a last team of fewer
// rows), against the double reference.
TEST_F(TestCategory, softmax_short_rows_over_teams_portable) {
  const auto portable = softfuse::Implementation::portable;
  std::uint64_t seed  = 3000;
  for (std::size_t rows : {129, 1000, 4097})
    for (std::size_t cols : {1, 3, 31, 32, 33, 63, 64}) {
      const auto values = random_values<float>(rows * cols, -20.0, 20.0, seed++);
      run_case<float, Kokkos::LayoutRight>(rows, cols, values, false, portable);
      run_case<float, Kokkos::LayoutRight>(rows, cols, values, true, portable);
      run_case<float, Kokkos::LayoutRight>(rows, cols, values, false, portable, Strides{0, 0, 1});  // off 16 bytes
      run_case<float, Kokkos::LayoutLeft>(rows, cols, values, false, portable);
      run_case<float, Kokkos::LayoutStride>(rows, cols, values, true, portable, Strides{cols + 5, 1, 3});
      run_case<double, Kokkos::LayoutRight>(rows, cols, random_values<double>(rows * cols, -20.0, 20.0, seed++), false,
                                            portable);
    }
}

// Rows held in more than 48 KiB of team scratch where the backend offers it (CUDA with the opt-in: the team
// regime's rows of 64 KiB on teams of 512 threads, every layout, float and double, and long rows cut into chunks
// of more than 48 KiB over teams, the chunked regime, rows of an odd length), against the double reference. Every
// test file instantiates these kernels again, so the opt-in must reach each file's own copy of a kernel.
TEST_F(TestCategory, softmax_held_rows_and_chunks_portable) {
  using namespace softfuse::Impl;
  const TestExecSpace space;
  const std::size_t scratch_max = Kokkos::TeamPolicy<TestExecSpace>(space, 1, 1).scratch_size_max(0);
  if (is_host_space<TestExecSpace>() || !resident_teams_progress<TestExecSpace>() || scratch_max <= 80 * 1024)
    GTEST_SKIP() << TestExecSpace::name() << " offers " << scratch_max << " bytes of team scratch";
  const auto bytes            = [](std::int64_t n) { return row_cache_t<TestExecSpace, float>::shmem_size(n); };
  const std::size_t cols_team = 16385, rows_team = static_cast<std::size_t>(space.concurrency() / 512 + 1);
  const RowPlan team = plan_rows(space, rows_team, cols_team, sizeof(float), true, bytes);
  ASSERT_EQ(int(team.regime), int(RowRegime::team));
  const std::size_t cols_chunked = 262147, rows_chunked = 64;
  const RowPlan chunked = plan_rows(space, rows_chunked, cols_chunked, sizeof(float), true, bytes);
  ASSERT_EQ(int(chunked.regime), int(RowRegime::chunked));
  ASSERT_GT(chunked.cached_chunk * sizeof(float), std::size_t(48) << 10);
  const std::size_t cols_team_double = 8193;  // 64 KiB rows of double
  ASSERT_EQ(int(plan_rows(space, rows_team, cols_team_double, sizeof(double), true,
                          [](std::int64_t n) { return row_cache_t<TestExecSpace, double>::shmem_size(n); })
                    .regime),
            int(RowRegime::team));
  const auto portable = softfuse::Implementation::portable;
  std::uint64_t seed  = 4800;
  for (bool in_place : {false, true}) {
    const auto team_values = random_values<float>(rows_team * cols_team, -20.0, 20.0, seed++);
    run_case<float, Kokkos::LayoutRight>(rows_team, cols_team, team_values, in_place, portable);
    run_case<float, Kokkos::LayoutLeft>(rows_team, cols_team, team_values, in_place, portable);
    run_case<float, Kokkos::LayoutStride>(rows_team, cols_team, team_values, in_place, portable);
    run_case<double, Kokkos::LayoutRight>(rows_team, cols_team_double,
                                          random_values<double>(rows_team * cols_team_double, -20.0, 20.0, seed++),
                                          in_place, portable);
    run_case<float, Kokkos::LayoutRight>(rows_chunked, cols_chunked,
                                         random_values<float>(rows_chunked * cols_chunked, -20.0, 20.0, seed++),
                                         in_place, portable);
  }
}

// The team regime's widths (GPUs): rows too few to fill the device on teams of 64 elements per thread take wider
// teams, many rows keep them; every width (128, 256, 512 threads, each its own kernel with the workers counted at
// compile time) over every layout, in place and not, against the double reference.
TEST_F(TestCategory, softmax_team_widths_portable) {
  using namespace softfuse::Impl;
  const TestExecSpace space;
  const std::size_t scratch_max = Kokkos::TeamPolicy<TestExecSpace>(space, 1, 1).scratch_size_max(0);
  if (is_host_space<TestExecSpace>() || scratch_max < 20000 * sizeof(float))
    GTEST_SKIP() << TestExecSpace::name() << " offers " << scratch_max << " bytes of team scratch";
  const auto bytes       = [](std::int64_t n) { return row_cache_t<TestExecSpace, float>::shmem_size(n); };
  const std::size_t few  = static_cast<std::size_t>(space.concurrency() / (2 * kGpuRowThreads) + 1);
  const std::size_t many = static_cast<std::size_t>(space.concurrency() / 64);
  const auto portable    = softfuse::Implementation::portable;
  std::set<int> widths;
  std::uint64_t seed = 5100;
  for (const auto& [rows, cols] : std::vector<std::pair<std::size_t, std::size_t>>{
           {few, 4097}, {few, 8192}, {few, 20000}, {many, 1025}, {many, 4096}}) {
    const RowPlan plan = plan_rows(space, rows, cols, sizeof(float), true, bytes);
    ASSERT_EQ(int(plan.regime), int(RowRegime::team)) << rows << "x" << cols;
    widths.insert(plan.team_size);
    const auto values = random_values<float>(rows * cols, -20.0, 20.0, seed++);
    run_case<float, Kokkos::LayoutRight>(rows, cols, values, false, portable);
    run_case<float, Kokkos::LayoutRight>(rows, cols, values, true, portable);
    run_case<float, Kokkos::LayoutLeft>(rows, cols, values, false, portable);
    run_case<float, Kokkos::LayoutStride>(rows, cols, values, true, portable);
  }
  for (int w : {128, 256, 512}) EXPECT_TRUE(widths.count(w)) << "no shape took teams of " << w;
}

// Rolling team rows (GPUs): rows of which team scratch holds one per multiprocessor, many more rows than
// multiprocessors (not a multiple of them, so teams take different counts), each written by its persistent team while
// the team loads its next row into the same scratch: random rows over every layout, in place and not; rows rising along
// their length (held exponentials rescaled while the previous row is written out from the same entries), with -inf and
// NaN; double rows; against the double reference.
TEST_F(TestCategory, softmax_rolling_team_rows_portable) {
  using namespace softfuse::Impl;
  const TestExecSpace space;
  const auto [rows, cols] = rolling_rows_shape<float>(space);
  if (rows == 0) GTEST_SKIP() << "no rolling team rows on " << TestExecSpace::name();
  const auto bytes   = [](std::int64_t n) { return row_cache_t<TestExecSpace, float>::shmem_size(n); };
  const RowPlan plan = plan_rows(space, rows, cols, sizeof(float), true, bytes);
  ASSERT_EQ(int(plan.regime), int(RowRegime::team));
  ASSERT_GT(plan.rolling, 0) << rows << "x" << cols;
  const auto portable = softfuse::Implementation::portable;
  std::uint64_t seed  = 5300;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const auto values = random_values<float>(rows * cols, -20.0, 20.0, seed++);
  auto rising       = random_values<float>(rows * cols, -1.0, 1.0, seed++);
  for (std::size_t i = 0; i < rows; ++i) {
    const double slope = i % 3 == 0 ? 0.1 : (i % 3 == 1 ? -0.1 : 1e-4);
    for (std::size_t j = 0; j < cols; ++j) rising[i * cols + j] += static_cast<float>(slope * double(j));
  }
  rising[5 * cols + cols - 1] = -inf;
  rising[8 * cols + cols / 2] = nan;
  for (bool in_place : {false, true}) {
    run_case<float, Kokkos::LayoutRight>(rows, cols, values, in_place, portable);
    run_case<float, Kokkos::LayoutLeft>(rows, cols, values, in_place, portable);
    run_case<float, Kokkos::LayoutStride>(rows, cols, values, in_place, portable);
    run_case<float, Kokkos::LayoutRight>(rows, cols, rising, in_place, portable);
  }
  const std::size_t cols_double = cols / 2;
  ASSERT_GT(plan_rows(space, rows, cols_double, sizeof(double), true,
                      [](std::int64_t n) { return row_cache_t<TestExecSpace, double>::shmem_size(n); })
                .rolling,
            0);
  run_case<double, Kokkos::LayoutRight>(
      rows, cols_double, random_values<double>(rows * cols_double, -20.0, 20.0, seed++), false, portable);
}

// Rows whose maximum keeps rising along the row, far enough that every block a GPU worker takes lies more than
// kHeldShiftSlack above the one before (a worker's held exponentials rescaled at each block), and rows rising
// slowly (never rescaled, the worker's shift below its maximum), in every regime that holds rows: packed, team
// and chunked, with -inf and NaN after the rise, against the double reference.
TEST_F(TestCategory, softmax_rising_rows_portable) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::uint64_t seed = 4900;
  for (std::size_t cols :
       {std::size_t(100), std::size_t(1000), std::size_t(8192), std::size_t(40000), std::size_t(262147)}) {
    const std::size_t rows = cols > 100000 ? 64 : 40;
    auto v                 = random_values<float>(rows * cols, -1.0, 1.0, seed++);
    for (std::size_t i = 0; i < rows; ++i) {
      // per element: 0.1 rises by more than 16 between a GPU worker's blocks (every 256 to 8192 elements)
      const double slope = i % 4 == 0 ? 0.1 : (i % 4 == 1 ? 1e-4 : (i % 4 == 2 ? -0.1 : 0.0));
      for (std::size_t j = 0; j < cols; ++j) v[i * cols + j] += static_cast<float>(slope * double(j));
    }
    v[5 * cols + cols - 1] = -inf;  // a rising row ending in -inf
    v[8 * cols + cols / 2] = nan;   // a NaN row
    for (bool in_place : {false, true}) {
      run_case<float, Kokkos::LayoutRight>(rows, cols, v, in_place, softfuse::Implementation::portable);
      run_case<double, Kokkos::LayoutRight>(rows, cols, std::vector<double>(v.begin(), v.end()), in_place,
                                            softfuse::Implementation::portable);
    }
  }
}

// The specialized kernels keep the portable path's semantics for special values, layouts they take
// (padded rows) and in place.
TEST_F(TestCategory, softmax_special_values_specialized) {
  if (!has_specialization()) GTEST_SKIP() << "no backend specialization on " << TestExecSpace::name();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t cols : {std::size_t(1), std::size_t(33), std::size_t(5000), std::size_t(70001), std::size_t(393216),
                           std::size_t(1179649)}) {
    const std::size_t rows = 6;
    auto v                 = random_values<float>(rows * cols, -5.0, 5.0, cols);
    auto row               = [&](std::size_t i) { return v.begin() + i * cols; };
    row(0)[cols / 2]       = nan;
    row(1)[cols - 1]       = inf;
    std::fill(row(2), row(3), -inf);
    row(3)[0] = -inf;
    for (std::size_t j = 0; j < cols; ++j) row(4)[j] = j % 2 ? 1e30f : -1e30f;
    for (bool in_place : {false, true})
      run_case<float, Kokkos::LayoutRight>(rows, cols, v, in_place, softfuse::Implementation::specialized);
  }
}

}  // namespace Test

namespace TestImplementationReported {
// Every operation returns the implementation that ran: the backend's specialization for Views it takes under
// Implementation::automatic, the portable one when asked for or when the Views are not the specialization's.
TEST_F(TestCategory, implementation_that_ran_is_reported) {
  using softfuse::Implementation;
  using M                   = Kokkos::View<float**, Kokkos::LayoutRight, ::Test::memory_space>;
  using V                   = Kokkos::View<float*, ::Test::memory_space>;
  const Implementation fast = ::Test::has_specialization() ? Implementation::specialized : Implementation::portable;
  const TestExecSpace space;
  const M x("x", 8, 16), y("y", 8, 16), w("w", 16, 16);
  const Kokkos::View<float**, Kokkos::LayoutStride, ::Test::memory_space> strided(
      y.data(), Kokkos::LayoutStride(4, 32, 8, 2));  // a column stride of 2: never specialized
  const V b("b", 16), scale("scale", 1);
  Kokkos::deep_copy(x, 0.5f);
  EXPECT_EQ(softfuse::softmax(space, x, y), fast);
  EXPECT_EQ(softfuse::softmax(space, x, y, Implementation::portable), Implementation::portable);
  EXPECT_EQ(softfuse::softmax(space, strided, strided), Implementation::portable);
  EXPECT_EQ(softfuse::linear_gelu_softmax(space, x, w, b, y), fast);
  EXPECT_EQ(softfuse::linear_gelu_softmax(space, x, w, b, y, softfuse::Gelu::tanh, Implementation::portable),
            Implementation::portable);
  const softfuse::BatchNorm<V> bn{V("gamma", 16), V("beta", 16), V("running_mean", 16), V("running_var", 16),
                                  softfuse::BatchNormMode::inference};
  Kokkos::deep_copy(bn.running_var, 1.0f);
  EXPECT_EQ(softfuse::linear_batchnorm_softmax(space, x, w, b, bn, scale, y), fast);
  EXPECT_EQ(softfuse::linear_batchnorm_softmax(space, x, w, b, bn, scale, y, Implementation::portable),
            Implementation::portable);
  space.fence();
}
}  // namespace TestImplementationReported
