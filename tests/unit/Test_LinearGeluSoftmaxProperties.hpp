// Randomized property tests of linear_gelu_softmax (Test_Properties_Common.hpp): random layers, layouts and
// special values, and shapes at the switch points of the portable row kernel's plans.

#include "Test_Properties_Common.hpp"

namespace TestProperties {

struct GeluLayer {
  template <class T, class Layout>
  static void run(Rng& g, std::string& what, Shape shape = {0, 0}) {
    const Linear<T> lin = random_linear<T>(g, 0, 30, what, shape);
    const auto gelu     = coin(g) ? softfuse::Gelu::exact : softfuse::Gelu::tanh;
    what += std::string(gelu == softfuse::Gelu::exact ? ", exact " : ", tanh ") + layout_name<Layout>();
    const auto impl = pick_implementation(g, what);
    const LayerViews<T, Layout> v(g, lin, what);
    SCOPED_TRACE(what);
    TestExecSpace space;
    softfuse::linear_gelu_softmax(space, v.x.view(), v.w.view(), TestLinearLayers::device_vector(lin.b), v.y.view(),
                                  gelu, impl);
    space.fence();
    std::vector<double> ref, tol;
    TestLinearLayers::gelu_reference(lin, gelu == softfuse::Gelu::exact, ref, tol);
    expect_layer_output(v.result(what), ref, tol, lin.batch, lin.out, what);
  }
};

TEST_F(TestCategory, properties_linear_gelu_softmax) {
  run_properties("properties_linear_gelu_softmax", [](Rng& g, std::string& what) { layer_case<GeluLayer>(g, what); });
}

TEST_F(TestCategory, properties_linear_gelu_softmax_regimes) {
  run_properties("properties_linear_gelu_softmax_regimes",
                 [](Rng& g, std::string& what) { layer_regime_case<GeluLayer>(g, what); });
}

}  // namespace TestProperties
