// The device against the host on the same inputs: softfuse::softmax on TestExecSpace (automatic:
// the specialized kernels where they apply) and on Kokkos::DefaultHostExecutionSpace (OpenMP in a
// CUDA build). Both are within 1e-5 of the fp64 reference, so they agree within 2e-5 (float).

#include "Test_LinearLayers_Common.hpp"
#include "Test_Softmax_Common.hpp"

#include <softfuse_linear_gelu_softmax.hpp>

namespace Test {

TEST_F(TestCategory, softmax_cross_check_host) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  for (std::size_t cols :
       {std::size_t(100), std::size_t(1024), std::size_t(8192), std::size_t(32768), std::size_t(393216)}) {
    const std::size_t rows = cols >= 32768 ? 16 : 300;
    const auto v           = random_values<float>(rows * cols, -10.0, 10.0, 77 + cols);
    Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> hx("hx", rows, cols), hy("hy", rows, cols);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) hx(i, j) = v[i * cols + j];
    Kokkos::View<float**, Kokkos::LayoutRight, memory_space> dx("dx", rows, cols), dy("dy", rows, cols);
    Kokkos::deep_copy(dx, hx);
    softfuse::softmax(TestExecSpace(), dx, dy);
    softfuse::softmax(Host(), hx, hy);
    Host().fence();
    auto from_device = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), dy);
    double worst     = 0;
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) {
        const double a = from_device(i, j), b = hy(i, j);
        const double scale = std::max(std::abs(b), 1e-30);
        worst              = std::max(worst, std::abs(a - b) / scale);
      }
    EXPECT_LE(worst, 2e-5) << rows << "x" << cols << ": " << TestExecSpace::name() << " vs " << Host::name();
    std::printf("cross-check %zux%zu %s vs %s: max relative difference %.3g\n", rows, cols, TestExecSpace::name(),
                Host::name(), worst);
  }
}

// The fused layers likewise (device: the CUDA specialization in every precision mode; host: the portable
// path in fp32): each is within its bound of the fp64 reference, so they agree within the sum of the bounds.
TEST_F(TestCategory, linear_cross_check_host) {
  using namespace TestLinearLayers;
  using Host = Kokkos::DefaultHostExecutionSpace;
  const Linear<float> lin(256, 1024, 1000, 901);
  const auto x = device_matrix(lin.x, lin.batch, lin.in, "x");
  const auto w = device_matrix(lin.w, lin.out, lin.in, "w");
  const auto b = device_vector(lin.b, "b");
  const Kokkos::View<float**, Kokkos::LayoutRight, memory_space> y("y", lin.batch, lin.out);
  Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> hx("hx", lin.batch, lin.in), hw("hw", lin.out, lin.in),
      hy("hy", lin.batch, lin.out);
  Kokkos::View<float*, Kokkos::HostSpace> hb("hb", lin.out);
  Kokkos::deep_copy(hx, x);
  Kokkos::deep_copy(hw, w);
  Kokkos::deep_copy(hb, b);
  softfuse::linear_gelu_softmax(Host(), hx, hw, hb, hy);
  Host().fence();
  std::vector<double> ref, tol, host_out;
  gelu_reference(lin, true, ref, tol);
  for (std::size_t k = 0; k < ref.size(); ++k) host_out.push_back(hy.data()[k]);
  for (auto mode : {softfuse::Precision::fp32, softfuse::Precision::tf32x3, softfuse::Precision::tf32}) {
    softfuse::linear_gelu_softmax(TestExecSpace(), x, w, b, y, softfuse::Gelu::exact,
                                  softfuse::Implementation::automatic, mode);
    std::vector<double> both(tol.size());
    for (std::size_t k = 0; k < tol.size(); ++k) both[k] = tol[k] * (1 + mode_factor(mode));
    expect_close(host_values(y), host_out, both, lin.out,
                 std::string("gelu ") + TestExecSpace::name() + " vs " + Host::name() + " " + mode_name(mode));
  }
}

}  // namespace Test
