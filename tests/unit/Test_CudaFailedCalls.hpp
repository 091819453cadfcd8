// A failed call into the CUDA kernels reports its own error once and leaves none behind: the calls after it,
// of every operation, run and are right. (CUDA keeps the last error of a thread until someone reads it; a
// library that throws without reading it makes the next unrelated call that checks for errors report it.)
// Include after backends/Test_Cuda.hpp.

#include <cstdint>
#include <stdexcept>
#include <string>

#include <softfuse_linear_batchnorm_softmax.hpp>
#include <softfuse_linear_gelu_softmax.hpp>
#include <softfuse_softmax.hpp>

#include "Test_LinearLayers_Common.hpp"
#include "Test_Softmax_Common.hpp"

namespace TestCudaFailedCalls {

using namespace TestLinearLayers;

// A tf32x3 layer whose 3xTF32 operand split cannot be allocated: x and the weight claim 2^40 columns of a
// 64-float buffer (2 x 2^41 floats of split, 16 TB); the allocation fails before anything reads them.
inline void force_failed_call() {
  using M = Kokkos::View<float**, Kokkos::LayoutRight, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using V = Kokkos::View<float*, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const std::size_t in = std::size_t(1) << 40;
  const auto buffer    = device_vector(std::vector<float>(64, 0.25f), "buffer");
  float* p             = buffer.data();
  const M x(p, 2, in), w(p, 2, in), y(p, 2, 2);
  try {
    softfuse::linear_gelu_softmax(Kokkos::Cuda(), x, w, V(p, 2), y, softfuse::Gelu::exact,
                                  softfuse::Implementation::specialized, softfuse::Precision::tf32x3);
    Kokkos::fence();
    ADD_FAILURE() << "a tf32x3 split of 2 x 2^41 floats did not fail";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot allocate"), std::string::npos) << e.what();
  }
}

inline void expect_every_operation_runs() {
  // softmax through the CUDA kernels
  const std::size_t rows = 64, cols = 1000;
  const auto v = Test::random_values<float>(rows * cols, -4.0, 4.0, 5);
  Test::run_case<float, Kokkos::LayoutRight>(rows, cols, v, false, softfuse::Implementation::specialized);
  // the fused layers in every precision, and a stored tf32x3 weight split
  const Linear<float> lin(8, 64, 48, 17);
  const auto x = device_matrix(lin.x, lin.batch, lin.in, "x"), w = device_matrix(lin.w, lin.out, lin.in, "w");
  const auto b = device_vector(lin.b, "b");
  std::vector<double> ref, tol;
  gelu_reference(lin, true, ref, tol);
  for (auto precision : {softfuse::Precision::fp32, softfuse::Precision::tf32, softfuse::Precision::tf32x3}) {
    const auto y = device_matrix(std::vector<float>(lin.batch * lin.out, 0.0f), lin.batch, lin.out, "y");
    EXPECT_NO_THROW(softfuse::linear_gelu_softmax(Kokkos::Cuda(), x, w, b, y, softfuse::Gelu::exact,
                                                  softfuse::Implementation::specialized, precision));
    Kokkos::fence();
    if (precision == softfuse::Precision::fp32) expect_close(host_values(y), ref, tol, lin.out, "gelu fp32", false);
  }
  EXPECT_NO_THROW((softfuse::Tf32x3Weight<decltype(w)>(Kokkos::Cuda(), w)));
  const BatchNormCase<float> c(lin, false, 17);
  using Vector = Kokkos::View<float*, memory_space>;
  for (auto mode : {BatchNormMode::training, BatchNormMode::inference}) {
    const softfuse::BatchNorm<Vector> bn{device_vector(c.gamma), device_vector(c.beta), device_vector(c.running_mean),
                                         device_vector(c.running_var), mode};
    const auto y = device_matrix(std::vector<float>(lin.batch * lin.out, 0.0f), lin.batch, lin.out, "y");
    EXPECT_NO_THROW(softfuse::linear_batchnorm_softmax(Kokkos::Cuda(), x, w, b, bn, device_vector(c.scale), y,
                                                       softfuse::Implementation::specialized));
    Kokkos::fence();
  }
}

TEST_F(TestCategory, cuda_failed_call_leaves_no_error) {
  force_failed_call();
  expect_every_operation_runs();
  force_failed_call();  // twice in a row: the second reports its own error, not the first's
  force_failed_call();
  expect_every_operation_runs();
}

}  // namespace TestCudaFailedCalls
