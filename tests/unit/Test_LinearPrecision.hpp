// The GEMM precision modes of the fused layers (softfuse::Precision, softfuse::Tf32x3Weight), written once for
// every backend: include after a backends/Test_<Backend>.hpp that defines TestExecSpace and TestCategory.
//
// Where a backend specialization runs the mode (CUDA, float), the result is checked against the double
// reference with the error model of the mode: the fp32 bounds of the layer tests scaled by the mode's unit
// roundoff over fp32's (tf32: inputs rounded to 2^-11, factor 2^13; tf32x3: the dropped low x low product and
// the low parts' rounding, ~2^-21, factor 8: mode_factor). Elsewhere the mode does not apply: the result must be the
// fp32 one, bit for bit.

#include <softfuse_linear_batchnorm_softmax.hpp>
#include <softfuse_linear_gelu_softmax.hpp>
#include <softfuse_precision.hpp>

#include "Test_LinearLayers_Common.hpp"

namespace TestLinearLayers {

inline bool mode_applies() { return softfuse::Impl::LinearSpecialization<TestExecSpace>::exists; }

// Runs GELU and BatchNorm (training, then inference on the updated statistics) on lin in every mode, with the
// weight split per call and prepared (Tf32x3Weight); checks each against the reference and, where no
// specialization runs the modes, against the fp32 result.
inline void run_precision_modes(const Linear<float>& lin, const std::string& shape) {
  using V      = Kokkos::View<float*, memory_space>;
  const auto x = device_matrix(lin.x, lin.batch, lin.in, "x");
  const auto w = device_matrix(lin.w, lin.out, lin.in, "w");
  const auto b = device_vector(lin.b, "b");
  const Kokkos::View<float**, Kokkos::LayoutRight, memory_space> y("y", lin.batch, lin.out);
  TestExecSpace space;
  const softfuse::Tf32x3Weight<decltype(w)> w3(space, w);
  BatchNormCase<float> c(lin, true, 77);

  std::vector<float> gelu_fp32, bn_fp32;
  for (auto mode : {softfuse::Precision::fp32, softfuse::Precision::tf32, softfuse::Precision::tf32x3}) {
    for (bool prepared : {false, true}) {
      if (prepared && mode != softfuse::Precision::tf32x3) continue;
      const std::string what = shape + " " + mode_name(mode) + (prepared ? " prepared" : "");
      // GELU
      if (prepared)
        softfuse::linear_gelu_softmax(space, x, w3, b, y);
      else
        softfuse::linear_gelu_softmax(space, x, w, b, y, softfuse::Gelu::exact, softfuse::Implementation::automatic,
                                      mode);
      space.fence();
      std::vector<double> ref, tol;
      gelu_reference(lin, true, ref, tol);
      for (auto& t : tol) t *= mode_factor(mode);
      const auto out = host_values(y);
      expect_close(out, ref, tol, lin.out, what + " gelu");
      if (mode == softfuse::Precision::fp32) gelu_fp32 = out;
      if (!mode_applies()) EXPECT_EQ(out, gelu_fp32) << what << ": the mode does not apply here, fp32 expected";

      // BatchNorm: a training step, then inference on the updated running statistics
      softfuse::BatchNorm<V> bn{device_vector(c.gamma, "gamma"), device_vector(c.beta, "beta"),
                                device_vector(c.running_mean, "running_mean"),
                                device_vector(c.running_var, "running_var")};
      const auto scale = device_vector(c.scale, "scale");
      BatchNormReference<float> reference(c);
      for (auto bn_mode : {BatchNormMode::training, BatchNormMode::inference}) {
        bn.mode = bn_mode;
        if (prepared)
          softfuse::linear_batchnorm_softmax(space, x, w3, b, bn, scale, y);
        else
          softfuse::linear_batchnorm_softmax(space, x, w, b, bn, scale, y, softfuse::Implementation::automatic, mode);
        space.fence();
        reference.step(c, bn_mode, bn.eps, bn.momentum, ref, tol);
        for (auto& t : tol) t *= mode_factor(mode);
        const auto bn_out    = host_values(y);
        const std::string at = what + (bn_mode == BatchNormMode::training ? " bn training" : " bn inference");
        expect_close(bn_out, ref, tol, lin.out, at);
        if (bn_mode == BatchNormMode::training && mode == softfuse::Precision::fp32) bn_fp32 = bn_out;
        if (bn_mode == BatchNormMode::training && !mode_applies())
          EXPECT_EQ(bn_out, bn_fp32) << at << ": the mode does not apply here, fp32 expected";
      }
    }
  }
}

TEST_F(TestCategory, linear_precision_modes) {
  run_precision_modes(Linear<float>(100, 250, 333, 501), "100x250x333");
  run_precision_modes(Linear<float>(3, 1031, 17, 502), "3x1031x17");
  run_precision_modes(Linear<float>(64, 2048, 64, 503), "64x2048x64");
}

// On a backend that runs the modes, TF32 must actually change the result (the mode reaches the GEMM).
TEST_F(TestCategory, linear_precision_tf32_takes_effect) {
  if (!mode_applies()) GTEST_SKIP() << "no backend specialization runs the precision modes here";
  const Linear<float> lin(32, 512, 48, 504);
  const auto x = device_matrix(lin.x, lin.batch, lin.in, "x");
  const auto w = device_matrix(lin.w, lin.out, lin.in, "w");
  const auto b = device_vector(lin.b, "b");
  const Kokkos::View<float**, Kokkos::LayoutRight, memory_space> y32("y32", lin.batch, lin.out),
      ytf("ytf", lin.batch, lin.out);
  softfuse::linear_gelu_softmax(TestExecSpace(), x, w, b, y32);
  softfuse::linear_gelu_softmax(TestExecSpace(), x, w, b, ytf, softfuse::Gelu::exact,
                                softfuse::Implementation::automatic, softfuse::Precision::tf32);
  EXPECT_NE(host_values(y32), host_values(ytf));
}

// The specialization forced and refused: both implementations agree with the reference.
TEST_F(TestCategory, linear_implementations_agree) {
  const Linear<float> lin(40, 300, 260, 505);
  const auto x = device_matrix(lin.x, lin.batch, lin.in, "x");
  const auto w = device_matrix(lin.w, lin.out, lin.in, "w");
  const auto b = device_vector(lin.b, "b");
  const Kokkos::View<float**, Kokkos::LayoutRight, memory_space> y("y", lin.batch, lin.out);
  std::vector<double> ref, tol;
  gelu_reference(lin, false, ref, tol);
  for (auto impl : {softfuse::Implementation::portable, softfuse::Implementation::specialized}) {
    if (impl == softfuse::Implementation::specialized && !mode_applies()) continue;
    softfuse::linear_gelu_softmax(TestExecSpace(), x, w, b, y, softfuse::Gelu::tanh, impl);
    expect_close(host_values(y), ref, tol, lin.out,
                 impl == softfuse::Implementation::portable ? "portable tanh" : "specialized tanh");
  }
}

}  // namespace TestLinearLayers
