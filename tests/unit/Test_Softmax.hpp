// softfuse::softmax against the double-precision reference, written once for every backend:
// include after a backends/Test_<Backend>.hpp that defines TestExecSpace and TestCategory.

#include "Test_Softmax_Common.hpp"

namespace Test {

template <class T, class Layout>
void run_shapes_and_ranges() {
  const std::size_t shapes[][2] = {{1, 1},    {1, 2},    {3, 7},    {17, 31},  {32, 32},  {5, 33},    {9, 1000},
                                   {4, 1023}, {4, 1024}, {3, 1025}, {1000, 3}, {2, 8191}, {2, 12289}, {2, 65537}};
  const double ranges[][2]      = {{0.0, 1.0}, {-10.0, 10.0}, {-1000.0, 1000.0}, {-1e30, 1e30}};
  std::uint64_t seed            = 1;
  for (const auto& s : shapes)
    for (const auto& r : ranges)
      for (bool in_place : {false, true})
        run_case<T, Layout>(s[0], s[1], random_values<T>(s[0] * s[1], r[0], r[1], seed++), in_place);
}

TEST_F(TestCategory, softmax_layout_right_float) { run_shapes_and_ranges<float, Kokkos::LayoutRight>(); }
TEST_F(TestCategory, softmax_layout_right_double) { run_shapes_and_ranges<double, Kokkos::LayoutRight>(); }
TEST_F(TestCategory, softmax_layout_left_float) { run_shapes_and_ranges<float, Kokkos::LayoutLeft>(); }
TEST_F(TestCategory, softmax_layout_left_double) { run_shapes_and_ranges<double, Kokkos::LayoutLeft>(); }
TEST_F(TestCategory, softmax_layout_stride_float) { run_shapes_and_ranges<float, Kokkos::LayoutStride>(); }
TEST_F(TestCategory, softmax_layout_stride_double) { run_shapes_and_ranges<double, Kokkos::LayoutStride>(); }

// Rows of a million columns and more, where a float sum would drift.
template <class T>
void run_long_rows() {
  for (std::size_t cols : {std::size_t(1) << 20, std::size_t(1048577), std::size_t(1500007)}) {
    run_case<T, Kokkos::LayoutRight>(3, cols, random_values<T>(3 * cols, 0.0, 1.0, cols), false);
    run_case<T, Kokkos::LayoutRight>(1, cols, random_values<T>(cols, -30.0, 30.0, cols + 1), true);
  }
}
TEST_F(TestCategory, softmax_long_rows_float) { run_long_rows<float>(); }
TEST_F(TestCategory, softmax_long_rows_double) { run_long_rows<double>(); }

// Rows longer than team scratch holds and than one GPU block keeps on chip, in column-major storage and as a
// column window of a wider View (row pitch cols + 13, first element 3 elements past the allocation's start, so
// no row is 16-byte aligned): these take the portable row kernel's streaming path on every backend and the
// CUDA kernels' multi-block paths. Inputs of several kinds (moderate, +-1e30, one constant, subnormal, a large
// offset), with NaN, +inf, -inf elements and rows of only -inf.
template <class T>
std::vector<T> long_row_values(std::size_t rows, std::size_t cols, int kind, std::uint64_t seed) {
  const double ranges[][2] = {{-5.0, 5.0}, {-1e30, 1e30}, {0.5, 0.5}, {-1e-39, 1e-39}, {1e6, 1e6 + 30}};
  auto v                   = kind == 2 ? std::vector<T>(rows * cols, T(0.5))
                                       : random_values<T>(rows * cols, ranges[kind][0], ranges[kind][1], seed);
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  auto row = [&](std::size_t i) { return v.begin() + i * cols; };
  for (std::size_t i = 0; i < rows; i += 3) row(i)[(i * 7919) % cols] = -inf, row(i)[cols - 1 - i] = -inf;
  if (rows > 1) row(1)[cols / 3] = nan;
  if (rows > 2) std::fill(row(rows - 1), row(rows - 1) + cols, -inf);
  if (rows > 4) row(4)[cols / 2] = inf;
  return v;
}

template <class T>
void run_long_rows_every_layout() {
  const std::size_t shapes[][2] = {{14, 131071}, {7, 1048573}, {3, 2621447}, {2, 4194319}};
  int kind                      = 0;
  for (const auto& s : shapes) {
    const std::size_t rows = s[0], cols = s[1];
    for (int k = 0; k < 2; ++k, kind = (kind + 1) % 5) {
      const auto v = long_row_values<T>(rows, cols, kind, rows * cols + k);
      run_case<T, Kokkos::LayoutLeft>(rows, cols, v, k == 1);
      for (auto impl : {softfuse::Implementation::automatic, softfuse::Implementation::portable})
        run_case<T, Kokkos::LayoutStride>(rows, cols, v, k == 1, impl, Strides{cols + 13, 1, 3});
    }
  }
}
TEST_F(TestCategory, softmax_long_rows_every_layout_float) { run_long_rows_every_layout<float>(); }
TEST_F(TestCategory, softmax_long_rows_every_layout_double) { run_long_rows_every_layout<double>(); }

// NaN, +inf and -inf rows follow the reference framework; huge values do not overflow.
template <class T>
void run_special_values() {
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  for (std::size_t cols : {std::size_t(1), std::size_t(2), std::size_t(33), std::size_t(1000), std::size_t(70001)}) {
    const std::size_t rows = 11;
    auto v                 = random_values<T>(rows * cols, -5.0, 5.0, 7 * cols);
    auto row               = [&](std::size_t i) { return v.begin() + i * cols; };
    const std::size_t mid  = cols / 2;
    row(0)[mid]            = nan;     // NaN anywhere -> NaN row
    row(1)[mid]            = inf;     // +inf -> NaN row
    std::fill(row(2), row(3), -inf);  // all -inf -> NaN row
    row(3)[0] = -inf;                 // some -inf -> zeros there
    if (cols > 1) row(3)[cols - 1] = -inf;
    row(4)[0] = -inf, row(4)[mid] = inf;                                                      // both -> NaN row
    for (std::size_t j = 0; j < cols; ++j) row(5)[j] = static_cast<T>(j % 2 ? 1e30 : -1e30);  // no overflow
    std::fill(row(6), row(7), static_cast<T>(1e30));  // all equal and huge -> uniform
    std::fill(row(7), row(8), static_cast<T>(-1e30));
    row(8)[mid]      = -std::numeric_limits<T>::max();  // the lowest finite value
    row(9)[cols - 1] = nan, row(9)[0] = inf;
    // -inf on every 4th column: on GPUs whole interleaved lanes of a team's row are -inf, the others finite
    for (std::size_t j = 0; j < cols; j += 4) row(10)[j] = -inf;
    for (bool in_place : {false, true}) {
      run_case<T, Kokkos::LayoutRight>(rows, cols, v, in_place);
      run_case<T, Kokkos::LayoutStride>(rows, cols, v, in_place);
    }
  }
}
TEST_F(TestCategory, softmax_special_values_float) { run_special_values<float>(); }
TEST_F(TestCategory, softmax_special_values_double) { run_special_values<double>(); }

// Differences x - max at the row exponential's edges: around its flush threshold (-87 float, -708 double),
// where results turn denormal (-87.3 / -708.4) and vanish (-103.3 / -745.1), in the row itself and between
// stretches of the row (the host pass takes exp against a stretch's maximum, then scales the stretch by
// exp(stretch maximum - row maximum)): rows of stretches of 1000 elements, each with its own maximum at one
// of those distances below the row's; stretches of -inf, NaN and +inf late in a row, rows of -inf, of one
// element, and of two elements at an edge's distance.
template <class T>
void run_exponent_edges() {
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const std::vector<double> edges =
      sizeof(T) == 4
          ? std::vector<double>{-1, -30, -60, -69, -86.9, -87, -87.1, -87.34, -88, -103, -103.3, -104, -150}
          : std::vector<double>{-1, -300, -690, -700, -707.9, -708, -708.1, -708.4, -709, -744, -745.1, -746, -800};
  for (std::size_t cols : {std::size_t(1), std::size_t(2), std::size_t(65), std::size_t(4099), std::size_t(20011)}) {
    const std::size_t rows = 8, stretch = 1000;
    auto v   = random_values<T>(rows * cols, -1.0, 0.0, cols);
    auto row = [&](std::size_t i) { return v.begin() + i * cols; };
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) {
        // stretch k sits edges[k] below the row maximum 0; within it, one element on each edge below that
        const std::size_t k = (j / stretch + i) % edges.size();
        const double base = j < stretch ? 0.0 : edges[k], within = j % 7 == 3 ? edges[(j / 7) % edges.size()] : 0.0;
        row(i)[j] = static_cast<T>(base + (within != 0.0 ? within : static_cast<double>(row(i)[j])));
      }
    for (std::size_t i = 0; i < rows; ++i) row(i)[(i * 31) % cols] = 0;  // the row maximum, exactly 0
    const std::size_t late = cols - 1 - cols / 5;
    std::fill(row(1) + late, row(1) + cols, -inf);  // a stretch of -inf: zeros there
    row(2)[late] = nan;                             // NaN late in the row -> NaN row
    row(3)[late] = inf;                             // +inf late in the row -> NaN row
    std::fill(row(4), row(5), -inf);                // all -inf -> NaN row
    if (cols == 2) row(5)[0] = 0, row(5)[1] = static_cast<T>(edges[6]), row(6)[0] = static_cast<T>(edges[10]);
    for (bool in_place : {false, true}) {
      run_case<T, Kokkos::LayoutRight>(rows, cols, v, in_place);
      run_case<T, Kokkos::LayoutStride>(rows, cols, v, in_place);
    }
  }
}
TEST_F(TestCategory, softmax_exponent_edges_float) { run_exponent_edges<float>(); }
TEST_F(TestCategory, softmax_exponent_edges_double) { run_exponent_edges<double>(); }

TEST_F(TestCategory, softmax_empty) {
  run_case<float, Kokkos::LayoutRight>(0, 5, {}, false);
  run_case<float, Kokkos::LayoutRight>(0, 0, {}, false);
  run_case<double, Kokkos::LayoutLeft>(4, 0, {}, true);
}

// Managed Views and the overload without an execution space.
TEST_F(TestCategory, softmax_managed_views_default_space) {
  const std::size_t rows = 37, cols = 129;
  const auto v = random_values<float>(rows * cols, -3.0, 3.0, 99);
  Kokkos::View<float**, Kokkos::LayoutRight, memory_space> x("x", rows, cols), y("y", rows, cols);
  auto h = Kokkos::create_mirror_view(x);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) h(i, j) = v[i * cols + j];
  Kokkos::deep_copy(x, h);
  softfuse::softmax(x, y);
  Kokkos::deep_copy(h, y);  // fences
  std::vector<float> out(rows * cols);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) out[i * cols + j] = h(i, j);
  expect_matches_reference(v, out, rows, cols, "managed");
}

// Both implementations where the backend has a specialization; the portable one everywhere.
TEST_F(TestCategory, softmax_portable_forced) {
  for (std::size_t cols : {std::size_t(1), std::size_t(100), std::size_t(4096), std::size_t(100000)})
    run_case<float, Kokkos::LayoutRight>(5, cols, random_values<float>(5 * cols, -8.0, 8.0, cols), false,
                                         softfuse::Implementation::portable);
}

TEST_F(TestCategory, softmax_mismatched_extents_throw) {
  Kokkos::View<float**, memory_space> x("x", 3, 4), y("y", 3, 5), z("z", 2, 4);
  try {
    softfuse::softmax(TestExecSpace(), x, y);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("softfuse::softmax"), std::string::npos) << m;
    EXPECT_NE(m.find("3 x 4"), std::string::npos) << m;
    EXPECT_NE(m.find("3 x 5"), std::string::npos) << m;
  }
  EXPECT_THROW(softfuse::softmax(x, z), std::invalid_argument);
}

TEST_F(TestCategory, softmax_specialized_unavailable_throws) {
  // A column stride of 2 is never handled by a specialization.
  Matrix<float, Kokkos::LayoutStride> x(4, 8);
  try {
    softfuse::softmax(TestExecSpace(), x.view(), x.view(), softfuse::Implementation::specialized);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("softfuse::softmax"), std::string::npos) << e.what();
  }
}

// More than 2^31 elements: 64-bit offsets. The input is periodic along each row with a prime
// period, so the reference row maximum and sum follow exactly from one period; it is generated and
// checked on the device, so only one 8.6 GB View is needed.
KOKKOS_INLINE_FUNCTION double device_exp(double v) {
#if KOKKOS_VERSION >= 30700
  return Kokkos::exp(v);
#else
  return Kokkos::Experimental::exp(v);
#endif
}

struct PeriodicPattern {
  static constexpr std::int64_t period = 65521;
  KOKKOS_INLINE_FUNCTION static float value(std::int64_t i, std::int64_t j) {
    std::uint64_t z = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(j % period);
    z               = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z               = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-53 * 8.0 - 4.0);
  }
};

// Device lambdas may not live in gtest's private TestBody: the test body is a free function.
inline void test_beyond_2_31_elements() {
  const std::int64_t rows = 2, cols = (std::int64_t(1) << 30) + 12345;
  ASSERT_GT(rows * cols, std::int64_t(1) << 31);
  Kokkos::View<float**, Kokkos::LayoutRight, memory_space> x(Kokkos::view_alloc(Kokkos::WithoutInitializing, "x"), rows,
                                                             cols);
  // 1-D ranges over all elements: Kokkos 3.4's CUDA MDRange mishandles extents this large.
  using range = Kokkos::RangePolicy<TestExecSpace, Kokkos::IndexType<std::int64_t>>;
  const range all(0, rows * cols);
  Kokkos::parallel_for(
      "fill", all,
      KOKKOS_LAMBDA(const std::int64_t k) { x(k / cols, k % cols) = PeriodicPattern::value(k / cols, k % cols); });

  // Reference statistics per row, in double, from the period.
  double ref_max[rows], ref_sum[rows];
  for (std::int64_t i = 0; i < rows; ++i) {
    double m = -std::numeric_limits<double>::infinity();
    for (std::int64_t k = 0; k < PeriodicPattern::period; ++k) m = std::max<double>(m, PeriodicPattern::value(i, k));
    double full = 0, partial = 0;
    const std::int64_t tail = cols % PeriodicPattern::period;
    for (std::int64_t k = 0; k < PeriodicPattern::period; ++k) {
      const double e = std::exp(static_cast<double>(PeriodicPattern::value(i, k)) - m);
      full += e;
      if (k < tail) partial += e;
    }
    ref_max[i] = m;
    ref_sum[i] = full * static_cast<double>(cols / PeriodicPattern::period) + partial;
  }

  softfuse::softmax(TestExecSpace(), x, x);

  const double m0 = ref_max[0], m1 = ref_max[1], s0 = ref_sum[0], s1 = ref_sum[1];
  for (std::int64_t i = 0; i < rows; ++i) {
    double row_sum = 0;
    Kokkos::parallel_reduce(
        "row sum", range(0, cols), KOKKOS_LAMBDA(const std::int64_t j, double& acc) { acc += x(i, j); }, row_sum);
    EXPECT_NEAR(row_sum, 1.0, 1e-5) << "row " << i;
  }
  // Every element against the reference; the count of those off by more than the tolerance.
  std::int64_t bad = 0;
  Kokkos::parallel_reduce(
      "check", all,
      KOKKOS_LAMBDA(const std::int64_t k, std::int64_t& n) {
        const std::int64_t i = k / cols, j = k % cols;
        const double ref =
            device_exp(static_cast<double>(PeriodicPattern::value(i, j)) - (i ? m1 : m0)) / (i ? s1 : s0);
        const double err = x(i, j) > ref ? x(i, j) - ref : ref - x(i, j);
        if (!(err <= 1e-5 * ref)) ++n;
      },
      bad);
  EXPECT_EQ(bad, 0) << "elements off the reference";
}
TEST_F(TestCategory, softmax_beyond_2_31_elements) { test_beyond_2_31_elements(); }

}  // namespace Test
