#ifndef SOFTFUSE_TESTS_REFERENCE_HPP
#define SOFTFUSE_TESTS_REFERENCE_HPP

// Double-precision host references, written independently of the library (plain loops, the
// textbook two-pass softmax), with the reference framework's semantics spelled out explicitly.

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace softfuse_test {

/// softmax of one row in double: NaN row when the row holds NaN or +inf or is all -inf.
inline void reference_softmax_row(const double* x, double* y, std::size_t n) {
  if (n == 0) return;
  double m = -std::numeric_limits<double>::infinity();
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

}  // namespace softfuse_test

#endif
