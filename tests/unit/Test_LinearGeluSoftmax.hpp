// softfuse::linear_gelu_softmax against the double-precision reference, written once for every backend:
// include after a backends/Test_<Backend>.hpp that defines TestExecSpace and TestCategory.
//
// Tolerances (softfuse_reference_layers.hpp): relative, per element, from the error model of a GEMM in T:
// each logit is off by about 2 sqrt(in) eps_T Σ|x w| + 2 eps_T (|z| + |b|); GELU passes that on (|gelu'| <=
// 1.13) and softmax turns input errors into relative output errors. For float (eps 1.2e-7) that is ~1e-6
// to 1e-5 on these shapes; for double (eps 2.2e-16) ~1e-14. Each case prints its worst error.

#include <softfuse_linear_gelu_softmax.hpp>

#include "Test_LinearLayers_Common.hpp"
#include "Test_RollingRows.hpp"

namespace TestLinearLayers {

// Runs the layer on `lin` through Views of Layout, checks y against the reference; returns y.
template <class T, class Layout = Kokkos::LayoutRight>
std::vector<T> run_gelu(const Linear<T>& lin, softfuse::Gelu gelu, const std::string& what) {
  const auto x = device_matrix<Layout>(lin.x, lin.batch, lin.in, "x");
  const auto w = device_matrix<Layout>(lin.w, lin.out, lin.in, "w");
  const auto b = device_vector(lin.b, "b");
  const auto y = device_matrix<Layout>(std::vector<T>(lin.batch * lin.out, T(-777)), lin.batch, lin.out, "y");
  TestExecSpace space;
  softfuse::linear_gelu_softmax(space, x, w, b, y, gelu);
  space.fence();
  const auto out = host_values(y);
  EXPECT_EQ(host_values(x), lin.x) << what << ": x changed";
  EXPECT_EQ(host_values(w), lin.w) << what << ": weight changed";

  std::vector<double> ref, tol;
  gelu_reference(lin, gelu == softfuse::Gelu::exact, ref, tol);
  expect_close(out, ref, tol, lin.out, what);
  return out;
}

template <class T>
void run_gelu_shapes() {
  const std::size_t shapes[][3] = {{64, 256, 512}, {3, 37, 29}, {1, 13, 7},   {1000, 19, 21},
                                   {5, 1, 3},      {2, 300, 1}, {7, 1031, 9}, {4, 0, 5}};
  std::uint64_t seed            = 100;
  for (const auto& s : shapes)
    for (auto gelu : {softfuse::Gelu::exact, softfuse::Gelu::tanh}) {
      const std::string what = std::string(sizeof(T) == 4 ? "float " : "double ") + std::to_string(s[0]) + "x" +
                               std::to_string(s[1]) + "x" + std::to_string(s[2]) +
                               (gelu == softfuse::Gelu::exact ? " exact" : " tanh");
      run_gelu<T>(Linear<T>(s[0], s[1], s[2], seed), gelu, what);
      run_gelu<T>(Linear<T>(s[0], s[1], s[2], seed + 7, {-1, 1}, 4 / std::sqrt(s[1] + 1.0)), gelu, what + " wide");
      seed += 10;
    }
}
TEST_F(TestCategory, linear_gelu_softmax_float) { run_gelu_shapes<float>(); }
TEST_F(TestCategory, linear_gelu_softmax_double) { run_gelu_shapes<double>(); }

// The two GELUs are different functions: on logits spread over [-4, 4] their softmax outputs differ far beyond
// the tolerance, while each matches its own reference.
TEST_F(TestCategory, linear_gelu_softmax_exact_differs_from_tanh) {
  const Linear<float> lin(32, 128, 256, 5, {-1, 1}, 6 / std::sqrt(128.0));
  const auto exact  = run_gelu<float>(lin, softfuse::Gelu::exact, "exact");
  const auto approx = run_gelu<float>(lin, softfuse::Gelu::tanh, "tanh");
  double max_rel    = 0;
  for (std::size_t k = 0; k < exact.size(); ++k)
    max_rel = std::max(max_rel, std::abs(double(exact[k]) - approx[k]) / std::abs(double(exact[k])));
  std::printf("    exact vs tanh GELU: max relative difference %.2e\n", max_rel);
  EXPECT_GT(max_rel, 1e-4) << "exact and tanh GELU must differ beyond the float tolerance (~1e-5)";
}

// The portable row pass on rolling team rows (GPUs: rows of which team scratch holds one per multiprocessor, rows
// enough for the team regime): the bias and GELU applied to each row as it loads, while the row before it is written
// out from the same team scratch.
TEST_F(TestCategory, linear_gelu_softmax_rolling_rows_portable) {
  using namespace softfuse::Impl;
  const TestExecSpace space;
  const auto [batch, out] = ::Test::rolling_rows_shape<float>(space);
  if (batch == 0) GTEST_SKIP() << "no rolling team rows on " << TestExecSpace::name();
  ASSERT_GT(plan_rows(space, batch, out, sizeof(float), true,
                      [](std::int64_t n) { return row_cache_t<TestExecSpace, float>::shmem_size(n); })
                .rolling,
            0);
  const Linear<float> lin(batch, 16, out, 6100, {-1, 1}, 4 / std::sqrt(17.0));
  const auto x = device_matrix(lin.x, lin.batch, lin.in, "x");
  const auto w = device_matrix(lin.w, lin.out, lin.in, "w");
  const auto b = device_vector(lin.b, "b");
  const Kokkos::View<float**, Kokkos::LayoutRight, memory_space> y("y", lin.batch, lin.out);
  softfuse::linear_gelu_softmax(space, x, w, b, y, softfuse::Gelu::exact, softfuse::Implementation::portable);
  std::vector<double> ref, tol;
  gelu_reference(lin, true, ref, tol);
  expect_close(host_values(y), ref, tol, lin.out, "portable rolling rows");
}

// Non-contiguous layouts go through Kokkos Kernels' own GEMM and strided rows.
TEST_F(TestCategory, linear_gelu_softmax_layouts) {
  run_gelu<float, Kokkos::LayoutLeft>(Linear<float>(9, 33, 17, 3), softfuse::Gelu::exact, "float LayoutLeft 9x33x17");
  run_gelu<double, Kokkos::LayoutLeft>(Linear<double>(9, 33, 17, 4), softfuse::Gelu::tanh, "double LayoutLeft 9x33x17");
}

TEST_F(TestCategory, linear_gelu_softmax_default_space_and_empty) {
  const Linear<float> lin(6, 40, 12, 11);
  const auto x = device_matrix(lin.x, lin.batch, lin.in), w = device_matrix(lin.w, lin.out, lin.in);
  const auto b = device_vector(lin.b);
  Kokkos::View<float**, Kokkos::LayoutRight, memory_space> y("y", lin.batch, lin.out), y_space("y", lin.batch, lin.out);
  softfuse::linear_gelu_softmax(x, w, b, y);
  softfuse::linear_gelu_softmax(TestExecSpace(), x, w, b, y_space);
  EXPECT_EQ(host_values(y), host_values(y_space));
  // No rows, no features: nothing to do, no error.
  Kokkos::View<float**, memory_space> x0("x0", 0, 40), y0("y0", 0, 12), y00("y00", 6, 0);
  Kokkos::View<float**, memory_space> w0("w0", 0, 40);
  Kokkos::View<float*, memory_space> b0("b0", 0);
  softfuse::linear_gelu_softmax(TestExecSpace(), x0, w, b, y0);
  softfuse::linear_gelu_softmax(TestExecSpace(), x, w0, b0, y00);
}

TEST_F(TestCategory, linear_gelu_softmax_bad_arguments_throw) {
  using M = Kokkos::View<float**, memory_space>;
  using V = Kokkos::View<float*, memory_space>;
  const M x("x", 4, 8), w("w", 5, 8), y("y", 4, 5);
  const V b("b", 5);
  const std::string f = "softfuse::linear_gelu_softmax";
  expect_invalid_argument([&] { softfuse::linear_gelu_softmax(TestExecSpace(), x, M("w", 5, 7), b, y); },
                          {f, "4 x 8", "5 x 7"}, "weight's in");
  expect_invalid_argument([&] { softfuse::linear_gelu_softmax(TestExecSpace(), x, w, V("b", 6), y); },
                          {f, "bias is 6", "5 x 8"}, "bias length");
  expect_invalid_argument([&] { softfuse::linear_gelu_softmax(TestExecSpace(), x, w, b, M("y", 3, 5)); },
                          {f, "4 x 8", "3 x 5"}, "y rows");
  expect_invalid_argument([&] { softfuse::linear_gelu_softmax(TestExecSpace(), x, w, b, M("y", 4, 6)); },
                          {f, "5 x 8", "4 x 6"}, "y columns");
  // No backend specializes double layers.
  using DM = Kokkos::View<double**, memory_space>;
  expect_invalid_argument(
      [&] {
        softfuse::linear_gelu_softmax(TestExecSpace(), DM("x", 4, 8), DM("w", 5, 8),
                                      Kokkos::View<double*, memory_space>("b", 5), DM("y", 4, 5), softfuse::Gelu::exact,
                                      softfuse::Implementation::specialized);
      },
      {f, "specialized"}, "specialized");
}

}  // namespace TestLinearLayers
