#ifndef SOFTFUSE_TESTS_REFERENCE_HPP
#define SOFTFUSE_TESTS_REFERENCE_HPP

// Double-precision host references, written independently of the library (plain loops, the
// textbook two-pass softmax), with the reference framework's semantics spelled out explicitly.

#include <cmath>
#include <cstddef>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace softfuse_test {

/// softmax of one row in double: NaN row when the row holds NaN or +inf or is all -inf.
inline void reference_softmax_row(const double* x, double* y, std::size_t n) {
  if (n == 0) return;
  double m     = -std::numeric_limits<double>::infinity();
  bool nan_row = false;
  for (std::size_t j = 0; j < n; ++j) {
    if (std::isnan(x[j]) || x[j] == std::numeric_limits<double>::infinity()) nan_row = true;
    if (x[j] > m) m = x[j];
  }
  if (m == -std::numeric_limits<double>::infinity()) nan_row = true;
  if (nan_row) {
    for (std::size_t j = 0; j < n; ++j) y[j] = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  double s = 0;
  for (std::size_t j = 0; j < n; ++j) s += std::exp(x[j] - m);
  for (std::size_t j = 0; j < n; ++j) y[j] = std::exp(x[j] - m) / s;
}

/// The invariants of one softmax output row y [n], whatever its input: either every element is NaN, or none
/// is, each lies in [0, 1] and they sum to 1 within sum_tol. Returns what is violated, or "" where they hold.
template <class T>
std::string softmax_row_invariants(const T* y, std::size_t n, double sum_tol) {
  std::size_t nans = 0;
  double sum       = 0;
  std::ostringstream bad;
  for (std::size_t j = 0; j < n; ++j) {
    const double v = static_cast<double>(y[j]);
    if (std::isnan(v)) {
      ++nans;
      continue;
    }
    sum += v;
    if (!(v >= 0 && v <= 1) && bad.tellp() == 0) bad << "y[" << j << "] = " << v << " is outside [0, 1]";
  }
  if (nans == n) return "";
  if (nans) return std::to_string(nans) + " of " + std::to_string(n) + " elements are NaN, not all";
  if (bad.tellp() != 0) return bad.str();
  if (n > 0 && !(std::abs(sum - 1.0) <= sum_tol)) {
    bad.precision(17);
    bad << "the row sums to " << sum;
  }
  return bad.str();
}

}  // namespace softfuse_test

#endif
