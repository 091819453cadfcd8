// Misuses of softfuse::softmax that must not compile; tests/CMakeLists.txt builds this file once per
// case (SOFTFUSE_CASE) and expects the compiler to print the function-named static_assert message.
#include <softfuse_softmax.hpp>

#include <vector>

void misuse() {
  Kokkos::View<float**> x("x", 2, 3), y("y", 2, 3);
#if SOFTFUSE_CASE == 1  // wrong rank
  Kokkos::View<float*> v("v", 3);
  softfuse::softmax(Kokkos::DefaultExecutionSpace(), v, y);
#elif SOFTFUSE_CASE == 2  // not a View
  std::vector<float> v(6);
  softfuse::softmax(Kokkos::DefaultExecutionSpace(), x, v);
#elif SOFTFUSE_CASE == 3  // const output
  Kokkos::View<const float**> c = y;
  softfuse::softmax(Kokkos::DefaultExecutionSpace(), x, c);
#elif SOFTFUSE_CASE == 4  // not an execution space
  softfuse::softmax(3, x, y);
#elif SOFTFUSE_CASE == 5  // memory the execution space cannot access (device View, host space)
  Kokkos::View<float**, Kokkos::CudaSpace> d("d", 2, 3);
  softfuse::softmax(Kokkos::DefaultHostExecutionSpace(), d, d);
#endif
}
