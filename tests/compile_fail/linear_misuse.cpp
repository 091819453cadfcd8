// Misuses of the fused layers that must not compile; tests/CMakeLists.txt builds this file once per case
// (SOFTFUSE_CASE) and expects the compiler to print the function-named static_assert message.
#include <softfuse_linear_batchnorm_softmax.hpp>
#include <softfuse_linear_gelu_softmax.hpp>

void misuse() {
  Kokkos::View<float**> x("x", 2, 3), w("w", 4, 3), y("y", 2, 4);
  Kokkos::View<float*> b("b", 4), s("s", 1);
  softfuse::BatchNorm<Kokkos::View<float*>> bn{b, b, b, b};
#if SOFTFUSE_CASE == 1  // weight of another value type than x
  Kokkos::View<double**> wd("wd", 4, 3);
  softfuse::linear_gelu_softmax(Kokkos::DefaultExecutionSpace(), x, wd, b, y);
#elif SOFTFUSE_CASE == 2  // const output
  Kokkos::View<const float**> c = y;
  softfuse::linear_gelu_softmax(Kokkos::DefaultExecutionSpace(), x, w, b, c);
#elif SOFTFUSE_CASE == 3  // bias of the wrong rank
  softfuse::linear_gelu_softmax(Kokkos::DefaultExecutionSpace(), x, w, w, y);
#elif SOFTFUSE_CASE == 4  // a value type other than float or double
  Kokkos::View<int**> xi("xi", 2, 3);
  softfuse::linear_gelu_softmax(Kokkos::DefaultExecutionSpace(), xi, w, b, y);
#elif SOFTFUSE_CASE == 5  // const BatchNorm state (running statistics are written in training mode)
  Kokkos::View<const float*> cb = b;
  softfuse::BatchNorm<Kokkos::View<const float*>> cbn{cb, cb, cb, cb};
  softfuse::linear_batchnorm_softmax(Kokkos::DefaultExecutionSpace(), x, w, b, cbn, s, y);
#elif SOFTFUSE_CASE == 6  // scale of the wrong rank
  softfuse::linear_batchnorm_softmax(Kokkos::DefaultExecutionSpace(), x, w, b, bn, w, y);
#elif SOFTFUSE_CASE == 7  // not an execution space
  softfuse::linear_batchnorm_softmax(3, x, w, b, bn, s, y);
#elif SOFTFUSE_CASE == 8  // memory the execution space cannot access (device Views, host space)
  Kokkos::View<float**, Kokkos::CudaSpace> d("d", 2, 3);
  softfuse::linear_gelu_softmax(Kokkos::DefaultHostExecutionSpace(), d, w, b, y);
#endif
}
