// The host-visible parts of the error model (README, "Error model") not covered elsewhere, written once for
// every backend: include after a backends/Test_<Backend>.hpp.
//  - A failed allocation surfaces as an exception naming the allocation, not as a crash or garbage: a
//    linear_batchnorm_softmax without a workspace allocates 3 * out elements per call, and with an absurd out
//    (2^58: 3.5e18 bytes) that allocation fails. Every View of the call is an unmanaged View of extent 2^58 on a
//    64-element buffer that nothing may read or write (the allocation comes before any kernel).
//  - A call that throws std::invalid_argument has launched nothing: its outputs and the BatchNorm state are
//    untouched.
// (Extent messages, Implementation::specialized and the compile-time checks have their own tests.)

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <softfuse_linear_batchnorm_softmax.hpp>
#include <softfuse_linear_gelu_softmax.hpp>
#include <softfuse_softmax.hpp>

#include "Test_LinearLayers_Common.hpp"

namespace TestErrorModel {

using namespace TestLinearLayers;

TEST_F(TestCategory, error_model_allocation_failure_throws) {
  using M = Kokkos::View<float**, Kokkos::LayoutRight, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using V = Kokkos::View<float*, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const std::size_t out = std::size_t(1) << 58, batch = 2, in = 1;
  const std::vector<float> fill(64, 0.25f);
  const auto buffer = device_vector(fill, "buffer");
  float* p          = buffer.data();
  const M x(p, batch, in), w(p, out, in), y(p, batch, out);
  const V vec(p, out), scale(p, 1);
  for (auto mode : {BatchNormMode::inference, BatchNormMode::training}) {
    const softfuse::BatchNorm<V> bn{vec, vec, vec, vec, mode};
    try {
      softfuse::linear_batchnorm_softmax(TestExecSpace(), x, w, vec, bn, scale, y);
      TestExecSpace().fence();
      ADD_FAILURE() << "an allocation of 3 * 2^58 floats did not throw";
    } catch (const std::runtime_error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("softfuse::batchnorm_workspace"), std::string::npos) << m;
      EXPECT_NE(m.find("allocate"), std::string::npos) << m;
      std::printf("    std::runtime_error: %s\n", m.substr(0, m.find('\n')).c_str());
    }
    EXPECT_EQ(host_values(buffer), fill) << "the failed call wrote to its Views";
  }
}

TEST_F(TestCategory, error_model_rejected_calls_touch_nothing) {
  using M = Kokkos::View<float**, memory_space>;
  using V = Kokkos::View<float*, memory_space>;
  const Linear<float> lin(4, 8, 5, 31);
  const BatchNormCase<float> c(lin, false, 31);
  const auto x = device_matrix(lin.x, 4, 8, "x"), w = device_matrix(lin.w, 5, 8, "w");
  const auto b = device_vector(lin.b, "b"), s1 = device_vector(c.scale, "scale");
  const std::vector<float> sentinel(4 * 5, -777.0f);
  const auto y = device_matrix(sentinel, 4, 5, "y");
  const softfuse::BatchNorm<V> bn{device_vector(c.gamma), device_vector(c.beta), device_vector(c.running_mean),
                                  device_vector(c.running_var)};
  const auto expect_untouched = [&](const std::string& what) {
    EXPECT_EQ(host_values(y), sentinel) << what << ": y changed";
    EXPECT_EQ(host_values(bn.running_mean), c.running_mean) << what << ": running_mean changed";
    EXPECT_EQ(host_values(bn.running_var), c.running_var) << what << ": running_var changed";
  };
  const auto expect_rejected = [&](const std::string& what, auto&& call) {
    EXPECT_THROW(call(), std::invalid_argument) << what;
    TestExecSpace().fence();
    expect_untouched(what);
  };
  const TestExecSpace space;
  expect_rejected("softmax, extents", [&] { softfuse::softmax(space, M("x", 4, 6), y); });
  expect_rejected("softmax, specialized", [&] {
    const Kokkos::View<float**, Kokkos::LayoutStride, memory_space> strided(
        "strided", Kokkos::LayoutStride(4, 11, 5, 2));  // a column stride of 2: never specialized
    softfuse::softmax(space, strided, y, softfuse::Implementation::specialized);
  });
  expect_rejected("gelu, y columns", [&] { softfuse::linear_gelu_softmax(space, x, w, b, M("y", 4, 6)); });
  expect_rejected("gelu, bias", [&] { softfuse::linear_gelu_softmax(space, x, w, V("b", 4), y); });
  expect_rejected("batchnorm, batch of one in training",
                  [&] { softfuse::linear_batchnorm_softmax(space, M("x1", 1, 8), w, b, bn, s1, M("y1", 1, 5)); });
  softfuse::BatchNorm<V> bad = bn;
  bad.gamma                  = V("gamma", 4);
  expect_rejected("batchnorm, gamma", [&] { softfuse::linear_batchnorm_softmax(space, x, w, b, bad, s1, y); });
  bad           = bn;
  bad.workspace = V("workspace", 14);
  expect_rejected("batchnorm, workspace", [&] { softfuse::linear_batchnorm_softmax(space, x, w, b, bad, s1, y); });
  expect_rejected("batchnorm, scale", [&] { softfuse::linear_batchnorm_softmax(space, x, w, b, bn, V("s", 3), y); });
  // The same arguments, corrected, do run: the state and y change.
  softfuse::linear_batchnorm_softmax(space, x, w, b, bn, s1, y);
  space.fence();
  EXPECT_NE(host_values(y), sentinel);
  EXPECT_NE(host_values(bn.running_mean), c.running_mean);
}

}  // namespace TestErrorModel
