// Randomized property tests of linear_batchnorm_softmax (Test_Properties_Common.hpp): random layers, modes,
// running statistics, layouts and special values, and shapes at the switch points of the portable row kernel's
// plans.

#include "Test_Properties_Common.hpp"

namespace TestProperties {

struct BatchNormLayer {
  template <class T, class Layout>
  static void run(Rng& g, std::string& what, Shape shape = {0, 0}) {
    const bool training = coin(g);
    const auto mode     = training ? BatchNormMode::training : BatchNormMode::inference;
    // float logits up to 1e17: the running variance (their square) must stay within float's range.
    BatchNormCase<T> c(random_linear<T>(g, training ? 2 : 0, sizeof(T) == 4 ? 17 : 30, what, shape), coin(g), g());
    const Linear<T>& lin = c.lin;
    if (!training && coin(g)) set_running_statistics(g, c);  // near the logits' own (else far off them)
    const bool workspace = coin(g);
    what += std::string(training ? ", training " : ", inference ") + (c.scale.size() == 1 ? "scalar" : "vector") +
            "-scale " + (workspace ? "workspace " : "") + layout_name<Layout>();
    const auto impl = pick_implementation(g, what);
    const LayerViews<T, Layout> v(g, lin, what);
    SCOPED_TRACE(what);
    using Vector = Kokkos::View<T*, typename TestExecSpace::memory_space>;
    using TestLinearLayers::device_vector;
    softfuse::BatchNorm<Vector> bn{device_vector(c.gamma), device_vector(c.beta), device_vector(c.running_mean),
                                   device_vector(c.running_var), mode};
    if (workspace) bn.workspace = Vector("workspace", 3 * lin.out + below(g, 5));
    TestExecSpace space;
    softfuse::linear_batchnorm_softmax(space, v.x.view(), v.w.view(), device_vector(lin.b), bn, device_vector(c.scale),
                                       v.y.view(), impl);
    space.fence();
    BatchNormReference<T> reference(c);
    std::vector<double> ref, tol;
    reference.step(c, mode, bn.eps, bn.momentum, ref, tol);
    expect_layer_output(v.result(what), ref, tol, lin.batch, lin.out, what);
    reference.expect_running(c, mode, TestLinearLayers::host_values(bn.running_mean),
                             TestLinearLayers::host_values(bn.running_var), what, false);
  }

  // Running statistics near the batch's own: each feature's mean and variance over the finite logits, the
  // variance scaled by 0.5 to 2.
  template <class T>
  static void set_running_statistics(Rng& g, BatchNormCase<T>& c) {
    const std::size_t batch = c.lin.batch, out = c.lin.out;
    std::vector<double> z, e;
    c.lin.reference(z, e);
    for (std::size_t j = 0; j < out; ++j) {
      double n = 0, sum = 0, sq = 0;
      for (std::size_t i = 0; i < batch; ++i)
        if (std::isfinite(z[i * out + j])) n += 1, sum += z[i * out + j];
      if (n == 0) continue;
      const double mean = sum / n;
      for (std::size_t i = 0; i < batch; ++i)
        if (std::isfinite(z[i * out + j])) sq += (z[i * out + j] - mean) * (z[i * out + j] - mean);
      c.running_mean[j] = static_cast<T>(mean);
      c.running_var[j]  = static_cast<T>(sq / n * uniform(g, 0.5, 2));
    }
  }
};

TEST_F(TestCategory, properties_linear_batchnorm_softmax) {
  run_properties("properties_linear_batchnorm_softmax",
                 [](Rng& g, std::string& what) { layer_case<BatchNormLayer>(g, what); });
}

TEST_F(TestCategory, properties_linear_batchnorm_softmax_regimes) {
  run_properties("properties_linear_batchnorm_softmax_regimes",
                 [](Rng& g, std::string& what) { layer_regime_case<BatchNormLayer>(g, what); });
}

}  // namespace TestProperties
