#ifndef SOFTFUSE_TESTS_SOFTMAX_ROW_CHECK_HPP
#define SOFTFUSE_TESTS_SOFTMAX_ROW_CHECK_HPP

// One softmax output row of the CUDA kernels against the double-precision reference (tests/reference), with
// the kernels' tolerances. Shared by test_softmax_kernels.cu and the sampled checks of
// perf/cuda_specialized/softmax_kernels_bench.cu.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "softfuse_reference.hpp"

template <class T>
struct Tol;
template <>
struct Tol<float> {
  static constexpr double rel = 1e-5, sum = 1e-5;
  static constexpr const char* name = "float";
};
template <>
struct Tol<double> {
  static constexpr double rel = 1e-10, sum = 1e-10;
  static constexpr const char* name = "double";
};

static const double kPoison = 777.0;  // never a softmax value, not NaN

struct RowCheck {
  bool ok        = true;
  double max_rel = 0.0;
  double sum_err = 0.0;
  char why[200]  = {0};
};

// x, y: one row of `cols` elements.
template <class T>
RowCheck check_row(const T* x, const T* y, std::int64_t cols) {
  RowCheck rc;
  const std::vector<double> xd(x, x + cols);
  std::vector<double> ref(static_cast<std::size_t>(cols));
  softfuse_test::reference_softmax_row(xd.data(), ref.data(), static_cast<std::size_t>(cols));
  if (cols > 0 && std::isnan(ref[0])) {  // the reference's NaN row
    for (std::int64_t c = 0; c < cols; ++c) {
      if (!std::isnan(static_cast<double>(y[c]))) {
        rc.ok = false;
        std::snprintf(rc.why, sizeof(rc.why), "expected a NaN row, col %lld = %g", (long long)c,
                      static_cast<double>(y[c]));
        return rc;
      }
    }
    return rc;
  }
  long double ysum = 0.0;  // the checker's own sum must not be the error
  for (std::int64_t c = 0; c < cols; ++c) {
    const double r   = ref[static_cast<std::size_t>(c)];
    const double got = static_cast<double>(y[c]);
    if (!std::isfinite(got) || got < 0.0 || got == kPoison) {
      // how many such columns and where they end: an unwritten chunk and a wrong row total look different
      const auto bad = [&](std::int64_t k) {
        const double v = static_cast<double>(y[k]);
        return !std::isfinite(v) || v < 0.0 || v == kPoison;
      };
      std::int64_t n = 0, last = c;
      for (std::int64_t k = c; k < cols; ++k)
        if (bad(k)) ++n, last = k;
      rc.ok = false;
      std::snprintf(rc.why, sizeof(rc.why), "col %lld: got %g, ref %g (%lld such columns, the last %lld)", (long long)c,
                    got, r, (long long)n, (long long)last);
      return rc;
    }
    ysum += got;
    if (r >= 1e-30) {
      const double rel = std::fabs(got - r) / r;
      rc.max_rel       = std::max(rc.max_rel, rel);
      if (rel > Tol<T>::rel) {
        rc.ok = false;
        std::snprintf(rc.why, sizeof(rc.why), "col %lld: got %.9g, ref %.9g, rel %.3g", (long long)c, got, r, rel);
        return rc;
      }
    } else if (std::fabs(got - r) > 1e-30) {
      rc.ok = false;
      std::snprintf(rc.why, sizeof(rc.why), "col %lld: got %g, ref %g (tiny)", (long long)c, got, r);
      return rc;
    }
  }
  rc.sum_err = static_cast<double>(std::fabs(ysum - 1.0L));
  if (rc.sum_err > Tol<T>::sum) {
    rc.ok = false;
    std::snprintf(rc.why, sizeof(rc.why), "row sum %.15g", static_cast<double>(ysum));
  }
  return rc;
}

#endif
