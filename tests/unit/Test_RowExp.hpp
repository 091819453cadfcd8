// The row kernels' exponentials (softfuse::Impl::row_exp: a vectorizable polynomial on host CPUs, the
// vendor's exp on GPUs; row_exp_nonpositive, its form for x <= 0 and NaN that the host row pass uses)
// against std::exp in double, at their edges: the overflow and underflow thresholds, results that would be
// denormal, NaN and ±inf, and a sweep of ordinary arguments. Run in a kernel of the backend, so each
// backend's own exponential is the one tested. Include after backends/Test_<Backend>.hpp.

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include <softfuse_team_softmax.hpp>

namespace TestRowExp {

template <class T>
struct RowExpKernel {
  Kokkos::View<const T*, typename TestExecSpace::memory_space> x;
  Kokkos::View<T*, typename TestExecSpace::memory_space> y, y_nonpositive;
  KOKKOS_INLINE_FUNCTION void operator()(const int i) const {
    y(i) = softfuse::Impl::row_exp(x(i));
    if (!(x(i) > 0)) y_nonpositive(i) = softfuse::Impl::row_exp_nonpositive(x(i));
  }
};

/// Arguments: both sides of every threshold of the documented semantics, and a sweep of [-750, 710].
template <class T>
std::vector<T> arguments() {
  const T inf      = std::numeric_limits<T>::infinity();
  std::vector<T> x = {0,
                      T(-0.0),
                      1,
                      -1,
                      T(0.5),
                      T(-0.5),
                      T(1e-30),
                      T(-1e-30),
                      inf,
                      -inf,
                      std::numeric_limits<T>::quiet_NaN(),
                      -std::numeric_limits<T>::quiet_NaN(),
                      std::numeric_limits<T>::max(),
                      std::numeric_limits<T>::lowest(),
                      std::numeric_limits<T>::denorm_min()};
  // float: flush below -87, inf above 88; double: flush below -708, inf above 709; denormal results below
  // log(smallest normal) = -87.3 / -708.4; overflow at 88.7 / 709.8.
  for (double edge : {-87.0, -87.33654, -88.0, -103.0, -104.0, 88.0, 88.72283, 89.0, -708.0, -708.39642, -709.0, -744.0,
                      -745.2, -746.0, 709.0, 709.78271, 710.0, -1e3, -1e30})
    for (double d : {-1e-6, 0.0, 1e-6}) x.push_back(static_cast<T>(edge + d * std::abs(edge)));
  for (int k = 0; k <= 14600; ++k) x.push_back(static_cast<T>(-750.0 + 0.1 * k + 0.013 * (k % 7)));
  return x;
}

/// Whether out is the documented exp(x) of T: within rel of std::exp, or the documented inf / 0 beyond the
/// thresholds.
template <class T>
bool documented_exp(const T x, const double out, const double rel) {
  const double ref = std::exp(static_cast<double>(x)), xi = static_cast<double>(x);
  const double smallest_normal = std::numeric_limits<T>::min(), largest = std::numeric_limits<T>::max();
  const double flush_below = sizeof(T) == 4 ? -87.0 : -708.0, inf_above = sizeof(T) == 4 ? 88.0 : 709.0;
  const bool accurate = std::abs(out - ref) <= rel * ref + 2.0 * std::numeric_limits<T>::denorm_min();
  if (std::isnan(ref)) return std::isnan(out);
  if (ref > largest) return out == std::numeric_limits<double>::infinity();
  if (xi > inf_above)  // documented: inf from there on (GPUs' own exp may stay finite and exact)
    return out == std::numeric_limits<double>::infinity() || accurate;
  if (xi < flush_below)  // documented: 0 from there on (GPUs' own exp may give the denormal)
    return out == 0 || accurate;
  return accurate && ref >= smallest_normal;
}

template <class T>
void test_row_exp(double rel) {
  const std::vector<T> x = arguments<T>();
  Kokkos::View<T*, typename TestExecSpace::memory_space> xd("x", x.size()), yd("y", x.size()),
      nd("y_nonpositive", x.size());
  Kokkos::deep_copy(
      xd, Kokkos::View<const T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(x.data(), x.size()));
  Kokkos::parallel_for("row_exp", Kokkos::RangePolicy<TestExecSpace>(0, x.size()), RowExpKernel<T>{xd, yd, nd});
  const auto y = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), yd);
  const auto n = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), nd);
  int failures = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!documented_exp(x[i], y(i), rel) && failures++ < 10)
      ADD_FAILURE() << "row_exp(" << static_cast<double>(x[i]) << ") = " << y(i)
                    << ", std::exp: " << std::exp(static_cast<double>(x[i]));
    if (!(x[i] > 0) && !documented_exp(x[i], n(i), rel) && failures++ < 10)
      ADD_FAILURE() << "row_exp_nonpositive(" << static_cast<double>(x[i]) << ") = " << n(i)
                    << ", std::exp: " << std::exp(static_cast<double>(x[i]));
  }
}

TEST_F(TestCategory, row_exp_float) { test_row_exp<float>(4e-7); }
TEST_F(TestCategory, row_exp_double) { test_row_exp<double>(1e-14); }

}  // namespace TestRowExp
