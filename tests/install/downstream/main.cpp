// What a user writes: softmax on the default execution space, checked against plain host math.
#include <softfuse.hpp>

#include <cmath>
#include <cstdio>

int main(int argc, char* argv[]) {
  int failures = 0;
  Kokkos::initialize(argc, argv);
  {
    const int rows = 4, cols = 37;
    Kokkos::View<double**> x("x", rows, cols), y("y", rows, cols);
    auto hx = Kokkos::create_mirror_view(x);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) hx(i, j) = std::sin(0.7 * i + 1.3 * j) * (i + 1);
    Kokkos::deep_copy(x, hx);
    softfuse::softmax(Kokkos::DefaultExecutionSpace(), x, y);
    auto hy = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), y);
    for (int i = 0; i < rows; ++i) {
      double m = hx(i, 0), s = 0;
      for (int j = 0; j < cols; ++j) m = std::fmax(m, hx(i, j));
      for (int j = 0; j < cols; ++j) s += std::exp(hx(i, j) - m);
      for (int j = 0; j < cols; ++j)
        if (std::abs(hy(i, j) - std::exp(hx(i, j) - m) / s) > 1e-12) ++failures;
    }
    std::printf("downstream: softfuse %d.%d.%d on %s, %d mismatches\n", SOFTFUSE_VERSION_MAJOR, SOFTFUSE_VERSION_MINOR,
                SOFTFUSE_VERSION_PATCH, Kokkos::DefaultExecutionSpace::name(), failures);
  }
  Kokkos::finalize();
  return failures == 0 ? 0 : 1;
}
