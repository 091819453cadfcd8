// Randomized property tests of softmax (Test_Properties_Common.hpp): random shapes, layouts, values and special
// values, and shapes at the switch points of the portable row kernel's plans.

#include "Test_Properties_Common.hpp"

namespace TestProperties {

TEST_F(TestCategory, properties_softmax) {
  run_properties("properties_softmax", [](Rng& g, std::string& what) {
    if (coin(g))
      softmax_case<float>(g, what);
    else
      softmax_case<double>(g, what);
  });
}

TEST_F(TestCategory, properties_softmax_regimes) {
  run_properties("properties_softmax_regimes", [](Rng& g, std::string& what) {
    const bool single = coin(g);
    std::string regime;
    const Shape s = single ? regime_shape<float>(g, softfuse::Impl::row_cache_pays<TestExecSpace>(), 1 << 21, regime)
                           : regime_shape<double>(g, softfuse::Impl::row_cache_pays<TestExecSpace>(), 1 << 21, regime);
    what =
        std::string(single ? "float " : "double ") + std::to_string(s.first) + "x" + std::to_string(s.second) + regime;
    switch (below(g, 3)) {
      case 0:
        single ? softmax_case<float, Kokkos::LayoutRight>(g, s.first, s.second, what)
               : softmax_case<double, Kokkos::LayoutRight>(g, s.first, s.second, what);
        break;
      case 1:
        single ? softmax_case<float, Kokkos::LayoutLeft>(g, s.first, s.second, what)
               : softmax_case<double, Kokkos::LayoutLeft>(g, s.first, s.second, what);
        break;
      default:
        single ? softmax_case<float, Kokkos::LayoutStride>(g, s.first, s.second, what)
               : softmax_case<double, Kokkos::LayoutStride>(g, s.first, s.second, what);
        break;
    }
  });
}

}  // namespace TestProperties
