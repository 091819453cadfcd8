// softfuse::linear_batchnorm_softmax against the double-precision reference, written once for every backend:
// include after a backends/Test_<Backend>.hpp that defines TestExecSpace and TestCategory.
//
// Tolerances (softfuse_reference_layers.hpp): relative, per element, from the error model of a GEMM in T.
// Each logit is off by about 2 sqrt(in) eps_T Σ|x w| + 2 eps_T (|z| + |b|); BatchNorm scales that by
// |s gamma| / std and adds the error of the batch statistics (bounded by the largest logit error of the
// feature, times 1 + |normalized value| for the std); softmax turns input errors into relative output errors.
// In training mode the bias cancels from the normalized values, so its rounding is not part of the bound:
// with a bias of 1e3 and a spread of 1, rounding z + b to float before taking statistics would already cost
// ~1e-3, and a one-pass E[z^2] - E[z]^2 in float would lose everything. Running statistics: momentum times the
// statistics' bound, plus roundings, carried across steps. The bounds come to ~1e-6 to 1e-4 for float, ~1e-14
// for double.

#include <softfuse_linear_batchnorm_softmax.hpp>

#include "Test_LinearLayers_Common.hpp"

namespace TestLinearLayers {

// Runs `steps` steps of the layer on c (a new x each step after the first, same range), checks y after every
// step and the running statistics after the first and the last, against the reference.
template <class T>
void run_batchnorm(BatchNormCase<T> c, BatchNormMode mode, int steps, const std::string& what_) {
  const std::string what = std::string(sizeof(T) == 4 ? "float " : "double ") + what_ +
                           (mode == BatchNormMode::training ? " training" : " inference") +
                           (c.scale.size() == 1 ? " scalar-scale" : " vector-scale");
  auto& lin             = c.lin;
  const std::size_t out = lin.out;
  const auto w          = device_matrix(lin.w, out, lin.in, "w");
  const auto b          = device_vector(lin.b, "b");
  const auto scale      = device_vector(c.scale, "scale");
  softfuse::BatchNorm<Kokkos::View<T*, memory_space>> bn{device_vector(c.gamma, "gamma"), device_vector(c.beta, "beta"),
                                                         device_vector(c.running_mean, "running_mean"),
                                                         device_vector(c.running_var, "running_var")};
  bn.mode = mode;
  const Kokkos::View<T**, Kokkos::LayoutRight, memory_space> y("y", lin.batch, out);

  BatchNormReference<T> reference(c);
  for (int step = 1; step <= steps; ++step) {
    if (step > 1) lin.x = random_values<T>(lin.x.size(), lin.xr.lo, lin.xr.hi, 1000 + step);
    const auto x = device_matrix(lin.x, lin.batch, lin.in, "x");
    TestExecSpace space;
    softfuse::linear_batchnorm_softmax(space, x, w, b, bn, scale, y);
    space.fence();

    std::vector<double> ref, tol;
    reference.step(c, mode, bn.eps, bn.momentum, ref, tol);
    const std::string at = what + " step " + std::to_string(step);
    expect_close(host_values(y), ref, tol, out, at + " y");
    if (step == 1 || step == steps)
      reference.expect_running(c, mode, host_values(bn.running_mean), host_values(bn.running_var), at);
  }
}

template <class T>
void run_batchnorm_shapes(BatchNormMode mode) {
  const std::size_t shapes[][3] = {{64, 256, 512}, {3, 37, 29}, {1000, 19, 21}, {2, 5, 3}, {1, 13, 7}, {6, 0, 4}};
  std::uint64_t seed            = 200;
  for (const auto& s : shapes) {
    if (mode == BatchNormMode::training && s[0] < 2) continue;  // no batch variance: see bad_arguments
    const std::string shape = std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]);
    for (bool vector_scale : {false, true}) {
      run_batchnorm(BatchNormCase<T>(Linear<T>(s[0], s[1], s[2], seed), vector_scale, seed), mode, 1, shape);
      seed += 20;
    }
  }
}
// An infinite input in the batch's first row: that feature's logits in row 0 are infinite, so its batch mean
// is infinite and its variance NaN, as in the reference (and not NaN for both: the first row must not serve
// as a shift of the statistics when it is not finite). Other rows hold the infinity in other shapes.
template <class T>
void run_infinite_first_row() {
  for (std::size_t row : {std::size_t(0), std::size_t(1)}) {
    BatchNormCase<T> c(Linear<T>(4, 3, 8, 77 + row), false, 77);
    c.lin.x[row * c.lin.in + 1] = std::numeric_limits<T>::infinity();
    run_batchnorm(c, BatchNormMode::training, 1, "4x3x8 +inf in x row " + std::to_string(row));
  }
}
TEST_F(TestCategory, linear_batchnorm_softmax_infinite_first_row_float) { run_infinite_first_row<float>(); }
TEST_F(TestCategory, linear_batchnorm_softmax_infinite_first_row_double) { run_infinite_first_row<double>(); }

TEST_F(TestCategory, linear_batchnorm_softmax_training_float) { run_batchnorm_shapes<float>(BatchNormMode::training); }
TEST_F(TestCategory, linear_batchnorm_softmax_training_double) {
  run_batchnorm_shapes<double>(BatchNormMode::training);
}
TEST_F(TestCategory, linear_batchnorm_softmax_inference_float) {
  run_batchnorm_shapes<float>(BatchNormMode::inference);
}
TEST_F(TestCategory, linear_batchnorm_softmax_inference_double) {
  run_batchnorm_shapes<double>(BatchNormMode::inference);
}

// Three training steps on new batches: y after each, running statistics after the first and the third.
template <class T>
void run_three_steps() {
  for (bool vector_scale : {false, true}) {
    run_batchnorm(BatchNormCase<T>(Linear<T>(64, 256, 512, 300), vector_scale, 300), BatchNormMode::training, 3,
                  "64x256x512 3 steps");
    run_batchnorm(BatchNormCase<T>(Linear<T>(7, 33, 19, 301), vector_scale, 301), BatchNormMode::training, 3,
                  "7x33x19 3 steps");
    // on CUDA (sm_90) the cooperative kernel: 32 blocks of 8 rows, 128 features joined per block
    run_batchnorm(BatchNormCase<T>(Linear<T>(256, 16, 4096, 302), vector_scale, 302), BatchNormMode::training, 3,
                  "256x16x4096 3 steps");
  }
}
TEST_F(TestCategory, linear_batchnorm_softmax_three_steps_float) { run_three_steps<float>(); }
TEST_F(TestCategory, linear_batchnorm_softmax_three_steps_double) { run_three_steps<double>(); }

// Feature means large against their spread: a bias of 1e3 (spread about 1), and logits whose own mean is about
// 80 standard deviations (a positive weight offset). Plus a constant feature (zero weights: variance 0).
template <class T>
void run_large_mean() {
  for (auto mode : {BatchNormMode::training, BatchNormMode::inference}) {
    Linear<T> biased(256, 64, 48, 400, {0, 1}, 3 / std::sqrt(64.0), {999, 1001});
    BatchNormCase<T> c(biased, true, 400);
    for (std::size_t j = 0; j < biased.out; ++j) c.running_mean[j] += biased.b[j];  // plausible in inference
    run_batchnorm(c, mode, 2, "256x64x48 bias 1e3");

    Linear<T> offset(128, 2048, 40, 401);
    for (auto& v : offset.w) v = static_cast<T>(v + 1.0);
    std::fill(offset.w.begin(), offset.w.begin() + offset.in, T(0));  // feature 0: constant b[0]
    BatchNormCase<T> d(offset, false, 401);
    for (std::size_t j = 0; j < offset.out; ++j) d.running_mean[j] += T(1024), d.running_var[j] *= T(170);
    run_batchnorm(d, mode, 1, "128x2048x40 logit mean 1e3, std 13");

    Linear<T> wide(256, 64, 4096, 402);  // the shape of CUDA's cooperative kernel
    for (auto& v : wide.w) v = static_cast<T>(v + 1.0);
    BatchNormCase<T> e(wide, true, 402);
    for (std::size_t j = 0; j < wide.out; ++j) e.running_mean[j] += T(32), e.running_var[j] *= T(2);
    run_batchnorm(e, mode, 1, "256x64x4096 logit mean 32");
  }
}
TEST_F(TestCategory, linear_batchnorm_softmax_large_mean_float) { run_large_mean<float>(); }
TEST_F(TestCategory, linear_batchnorm_softmax_large_mean_double) { run_large_mean<double>(); }

// The overload without an execution space, and a caller's workspace: the same results.
TEST_F(TestCategory, linear_batchnorm_softmax_default_space_and_workspace) {
  const Linear<float> lin(6, 40, 12, 11);
  const BatchNormCase<float> c(lin, false, 11);
  const auto x = device_matrix(lin.x, lin.batch, lin.in), w = device_matrix(lin.w, lin.out, lin.in);
  const auto b = device_vector(lin.b), scale = device_vector(c.scale);
  using V = Kokkos::View<float*, memory_space>;
  using M = Kokkos::View<float**, Kokkos::LayoutRight, memory_space>;
  for (auto mode : {BatchNormMode::inference, BatchNormMode::training}) {
    softfuse::BatchNorm<V> bn{device_vector(c.gamma), device_vector(c.beta), device_vector(c.running_mean),
                              device_vector(c.running_var), mode};
    softfuse::BatchNorm<V> bn2{bn.gamma, bn.beta, device_vector(c.running_mean), device_vector(c.running_var), mode};
    bn2.workspace = V("workspace", 3 * lin.out + 5);
    const M y("y", lin.batch, lin.out), y2("y2", lin.batch, lin.out);
    softfuse::linear_batchnorm_softmax(x, w, b, bn, scale, y);
    softfuse::linear_batchnorm_softmax(TestExecSpace(), x, w, b, bn2, scale, y2);
    EXPECT_EQ(host_values(y), host_values(y2));
    EXPECT_EQ(host_values(bn.running_mean), host_values(bn2.running_mean));
    EXPECT_EQ(host_values(bn.running_var), host_values(bn2.running_var));
  }
}

TEST_F(TestCategory, linear_batchnorm_softmax_bad_arguments_throw) {
  using M = Kokkos::View<float**, memory_space>;
  using V = Kokkos::View<float*, memory_space>;
  const M x("x", 4, 8), w("w", 5, 8), y("y", 4, 5);
  const V b("b", 5), s1("s", 1), v5("v", 5), v3("v3", 3);
  const std::string f = "softfuse::linear_batchnorm_softmax";
  const softfuse::BatchNorm<V> bn{v5, v5, V("rm", 5), V("rv", 5)};
  const auto call = [&](const softfuse::BatchNorm<V>& p, const V& scale, const M& xx, const M& yy) {
    return [=] { softfuse::linear_batchnorm_softmax(TestExecSpace(), xx, w, b, p, scale, yy); };
  };
  expect_invalid_argument(call(bn, s1, M("x1", 1, 8), M("y1", 1, 5)), {f, "training", "1 x 8", "1 x 5"}, "batch 1");
  expect_invalid_argument(call(bn, s1, M("x0", 0, 8), M("y0", 0, 5)), {f, "training", "0 x 8"}, "batch 0");
  for (int k = 0; k < 4; ++k) {
    softfuse::BatchNorm<V> p = bn;
    const char* names[]      = {"bn.gamma is 3", "bn.beta is 3", "bn.running_mean is 3", "bn.running_var is 3"};
    (k == 0 ? p.gamma : k == 1 ? p.beta : k == 2 ? p.running_mean : p.running_var) = v3;
    expect_invalid_argument(call(p, s1, x, y), {f, names[k], "weight is 5 x 8"}, names[k]);
  }
  expect_invalid_argument(call(bn, v3, x, y), {f, "scale is 3", "5 x 8"}, "scale length");
  softfuse::BatchNorm<V> small_workspace = bn;
  small_workspace.workspace              = V("workspace", 14);
  expect_invalid_argument(call(small_workspace, s1, x, y), {f, "bn.workspace is 14", "5 x 8"}, "workspace size");
  expect_invalid_argument(call(bn, s1, x, M("y", 4, 6)), {f, "5 x 8", "4 x 6"}, "y columns");
  expect_invalid_argument(call(bn, s1, M("x", 4, 7), y), {f, "4 x 7", "5 x 8"}, "x columns");
  // No backend specializes double layers.
  using DM = Kokkos::View<double**, memory_space>;
  using DV = Kokkos::View<double*, memory_space>;
  const DV d5("d5", 5);
  const softfuse::BatchNorm<DV> dbn{d5, d5, d5, d5};
  expect_invalid_argument(
      [&] {
        softfuse::linear_batchnorm_softmax(TestExecSpace(), DM("x", 4, 8), DM("w", 5, 8), d5, dbn, DV("s", 1),
                                           DM("y", 4, 5), softfuse::Implementation::specialized);
      },
      {f, "specialized"}, "specialized");
  // Batch 1 is fine in inference mode.
  softfuse::BatchNorm<V> inference = bn;
  inference.mode                   = BatchNormMode::inference;
  softfuse::linear_batchnorm_softmax(TestExecSpace(), M("x1", 1, 8), w, b, inference, s1, M("y1", 1, 5));
}

}  // namespace TestLinearLayers
