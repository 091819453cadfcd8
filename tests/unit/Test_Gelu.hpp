// The row pass's GELU (softfuse::Impl::gelu_exact and gelu_tanh: vectorizable forms on host CPUs, the vendor's
// erf and tanh on GPUs) against double-precision references, in a kernel of the backend: special values (NaN,
// ±inf, ±0, the largest finite values), the range where exp(-u^2) flushes to 0 (z near -13.2), and a sweep of
// [-40, 40]. What the softmax needs is the absolute error of the logit; where the host forms are used (float
// exact, and tanh) negative z also keep their relative accuracy. Include after backends/Test_<Backend>.hpp.

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <vector>

#include <impl/softfuse_gelu.hpp>
#include <impl/softfuse_team_config.hpp>

namespace TestGelu {

template <class T>
struct GeluKernel {
  Kokkos::View<const T*, typename TestExecSpace::memory_space> z;
  Kokkos::View<T*, typename TestExecSpace::memory_space> exact, approx;
  KOKKOS_INLINE_FUNCTION void operator()(const int i) const {
    exact(i)  = softfuse::Impl::gelu_exact(z(i));
    approx(i) = softfuse::Impl::gelu_tanh(z(i));
  }
};

template <class T>
std::vector<T> arguments() {
  const T inf      = std::numeric_limits<T>::infinity();
  std::vector<T> z = {0,   T(-0.0), T(1e-30), T(-1e-30), std::numeric_limits<T>::denorm_min(), inf, -inf,
                      std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::max(), std::numeric_limits<T>::lowest(),
                      T(1e20), T(-1e20)};
  for (int k = 0; k <= 400; ++k) z.push_back(static_cast<T>(-13.4 + 0.001 * k));  // exp(-u^2) flushes near -13.2
  for (int k = 0; k <= 80000; ++k) z.push_back(static_cast<T>(-40.0 + 0.001 * k + 0.00031 * (k % 3)));
  return z;
}

/// z Phi(z) and its tanh form, in double without cancellation for z < 0.
double reference_exact(const double z) { return 0.5 * z * std::erfc(-z / std::sqrt(2.0)); }
double reference_tanh(const double z) {
  const double w = std::sqrt(2.0 / 3.14159265358979323846) * (z + 0.044715 * z * z * z);
  return z / (1.0 + std::exp(-2.0 * w));  // = z (1 + tanh w) / 2
}

/// NaN for NaN and -inf (-inf * 0), +inf for +inf; elsewhere within abs_tol (1 + |z|) of the reference and,
/// where rel_tol > 0 and the reference is at least 1e-30 in magnitude, within rel_tol of it.
bool documented_gelu(const double z, const double got, const double ref, const double abs_tol, const double rel_tol) {
  if (std::isnan(z) || z == -std::numeric_limits<double>::infinity()) return std::isnan(got);
  if (z == std::numeric_limits<double>::infinity()) return got == z;
  if (std::isinf(ref)) return got == ref;  // z*z*z overflows in T, the reference in double does not
  if (!(std::abs(got - ref) <= abs_tol * (1 + std::abs(z)))) return false;
  return rel_tol == 0 || std::abs(ref) < 1e-30 || std::abs(got - ref) <= rel_tol * std::abs(ref);
}

template <class T>
void test_gelu(const double abs_tol, const double rel_tol_exact, const double rel_tol_tanh) {
  const std::vector<T> z = arguments<T>();
  Kokkos::View<T*, typename TestExecSpace::memory_space> zd("z", z.size()), ed("exact", z.size()),
      td("tanh", z.size());
  Kokkos::deep_copy(
      zd, Kokkos::View<const T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(z.data(), z.size()));
  Kokkos::parallel_for("gelu", Kokkos::RangePolicy<TestExecSpace>(0, z.size()), GeluKernel<T>{zd, ed, td});
  const auto e = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ed);
  const auto t = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), td);
  int failures = 0;
  // the largest errors over finite results: |error| / (1 + |z|), and relative where |reference| >= 1e-30
  double worst_abs[2] = {0, 0}, worst_rel[2] = {0, 0};
  for (std::size_t i = 0; i < z.size(); ++i) {
    const double zi = static_cast<double>(z[i]), re = reference_exact(zi), rt = reference_tanh(zi);
    if (!documented_gelu(zi, e(i), re, abs_tol, rel_tol_exact) && failures++ < 10)
      ADD_FAILURE() << "gelu_exact(" << zi << ") = " << static_cast<double>(e(i)) << ", reference " << re;
    if (!documented_gelu(zi, t(i), rt, abs_tol, rel_tol_tanh) && failures++ < 10)
      ADD_FAILURE() << "gelu_tanh(" << zi << ") = " << static_cast<double>(t(i)) << ", reference " << rt;
    const double got[2] = {static_cast<double>(e(i)), static_cast<double>(t(i))}, ref[2] = {re, rt};
    for (int f = 0; f < 2; ++f) {
      if (!std::isfinite(got[f]) || !std::isfinite(ref[f])) continue;
      const double err = std::abs(got[f] - ref[f]);
      worst_abs[f]     = std::max(worst_abs[f], err / (1 + std::abs(zi)));
      if (std::abs(ref[f]) >= 1e-30) worst_rel[f] = std::max(worst_rel[f], err / std::abs(ref[f]));
    }
  }
  const char* names[2] = {"exact", "tanh"};
  for (int f = 0; f < 2; ++f)
    std::cout << "    gelu " << names[f] << (sizeof(T) == 4 ? " float" : " double") << ": max |error| / (1 + |z|) "
              << worst_abs[f] << ", max relative error " << worst_rel[f] << " (|reference| >= 1e-30)\n";
}

constexpr bool host = softfuse::Impl::is_host_space<TestExecSpace>();

TEST_F(TestCategory, gelu_float) { test_gelu<float>(4e-7, host ? 3e-5 : 0, host ? 3e-5 : 0); }
TEST_F(TestCategory, gelu_double) { test_gelu<double>(1e-15, 0, host ? 1e-12 : 0); }

}  // namespace TestGelu
