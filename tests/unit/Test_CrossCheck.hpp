// The device against the host on the same inputs: softfuse::softmax on TestExecSpace (automatic:
// the specialized kernels where they apply) and on Kokkos::DefaultHostExecutionSpace (OpenMP in a
// CUDA build). Both are within 1e-5 of the fp64 reference, so they agree within 2e-5 (float).

#include "Test_Softmax_Common.hpp"

namespace Test {

TEST_F(TestCategory, softmax_cross_check_host) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  for (std::size_t cols : {std::size_t(100), std::size_t(1024), std::size_t(8192), std::size_t(32768),
                           std::size_t(393216)}) {
    const std::size_t rows = cols >= 32768 ? 16 : 300;
    const auto v = random_values<float>(rows * cols, -10.0, 10.0, 77 + cols);
    Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> hx("hx", rows, cols), hy("hy", rows, cols);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) hx(i, j) = v[i * cols + j];
    Kokkos::View<float**, Kokkos::LayoutRight, memory_space> dx("dx", rows, cols), dy("dy", rows, cols);
    Kokkos::deep_copy(dx, hx);
    softfuse::softmax(TestExecSpace(), dx, dy);
    softfuse::softmax(Host(), hx, hy);
    Host().fence();
    auto from_device = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), dy);
    double worst = 0;
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) {
        const double a = from_device(i, j), b = hy(i, j);
        const double scale = std::max(std::abs(b), 1e-30);
        worst = std::max(worst, std::abs(a - b) / scale);
      }
    EXPECT_LE(worst, 2e-5) << rows << "x" << cols << ": " << TestExecSpace::name() << " vs " << Host::name();
    std::printf("cross-check %zux%zu %s vs %s: max relative difference %.3g\n", rows, cols, TestExecSpace::name(),
                Host::name(), worst);
  }
}

}  // namespace Test
