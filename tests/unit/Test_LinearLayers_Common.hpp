#ifndef SOFTFUSE_TEST_LINEAR_LAYERS_COMMON_HPP
#define SOFTFUSE_TEST_LINEAR_LAYERS_COMMON_HPP

// What the fused-layer tests share: random layers on host and device, the double reference logits with
// their error bounds, and the comparison of outputs against reference values and relative tolerances.
// Include after a backends/Test_<Backend>.hpp (TestExecSpace).

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <softfuse_linear_batchnorm_softmax.hpp>
#include <softfuse_precision.hpp>

#include "Test_Random.hpp"
#include "softfuse_reference_layers.hpp"

namespace TestLinearLayers {

using memory_space = typename TestExecSpace::memory_space;

/// The unit of the error model: the type's machine epsilon.
template <class T>
constexpr double epsilon() {
  return std::numeric_limits<T>::epsilon();
}
/// References below this are compared absolutely (underflow of exp in T).
template <class T>
constexpr double tiny() {
  return std::numeric_limits<T>::min() * 16;
}

using softfuse_test::random_values;

/// A device View of `Layout` holding values (row-major rows x cols).
template <class Layout = Kokkos::LayoutRight, class T>
Kokkos::View<T**, Layout, memory_space> device_matrix(const std::vector<T>& values, std::size_t rows, std::size_t cols,
                                                      const std::string& label = "matrix") {
  Kokkos::View<T**, Layout, memory_space> v(label, rows, cols);
  auto h = Kokkos::create_mirror_view(v);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) h(i, j) = values[i * cols + j];
  Kokkos::deep_copy(v, h);
  return v;
}

template <class T>
Kokkos::View<T*, memory_space> device_vector(const std::vector<T>& values, const std::string& label = "vector") {
  Kokkos::View<T*, memory_space> v(label, values.size());
  auto h = Kokkos::create_mirror_view(v);
  for (std::size_t j = 0; j < values.size(); ++j) h(j) = values[j];
  Kokkos::deep_copy(v, h);
  return v;
}

/// A View's values on the host, row-major.
template <class View>
std::vector<typename View::non_const_value_type> host_values(const View& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  std::vector<typename View::non_const_value_type> out;
  if constexpr (static_cast<int>(View::rank) == 1) {
    for (std::size_t j = 0; j < h.extent(0); ++j) out.push_back(h(j));
  } else {
    for (std::size_t i = 0; i < h.extent(0); ++i)
      for (std::size_t j = 0; j < h.extent(1); ++j) out.push_back(h(i, j));
  }
  return out;
}

template <class T>
std::vector<double> to_double(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

struct Range {
  double lo, hi;
};

/// A Linear layer and its input: x [batch, in], w [out, in], b [out], on the host. Defaults are the
/// reference workload's: x uniform [0, 1), w and b uniform within 1/sqrt(in) (the framework's init).
template <class T>
struct Linear {
  std::size_t batch, in, out;
  Range xr;
  std::vector<T> x, w, b;

  Linear(std::size_t batch_, std::size_t in_, std::size_t out_, std::uint64_t seed, Range x_range = {0, 1},
         double w_bound = 0, Range br = {0, 0})
      : batch(batch_), in(in_), out(out_), xr(x_range) {
    const double bound = 1 / std::sqrt(static_cast<double>(in ? in : 1));
    if (w_bound == 0) w_bound = bound;
    if (br.lo == 0 && br.hi == 0) br = {-bound, bound};
    x = random_values<T>(batch * in, xr.lo, xr.hi, seed);
    w = random_values<T>(out * in, -w_bound, w_bound, seed + 1);
    b = random_values<T>(out, br.lo, br.hi, seed + 2);
  }

  /// The reference logits z [batch, out] (bias included) and their error bounds e [batch, out]; without
  /// `bias_rounded`, the bias is left out of the bounds (BatchNorm in training mode, where it cancels).
  void reference(std::vector<double>& z, std::vector<double>& e, bool bias_rounded = true) const {
    z.assign(batch * out, 0.0);
    e.assign(batch * out, 0.0);
    std::vector<double> peak(out);
    for (std::size_t i = 0; i < batch; ++i) {
      softfuse_test::reference_linear_row(x.data() + i * in, w.data(), b.data(), in, out, z.data() + i * out,
                                          peak.data());
      for (std::size_t j = 0; j < out; ++j)
        e[i * out + j] = bias_rounded
                             ? softfuse_test::logit_error(epsilon<T>(), in, peak[j], z[i * out + j], b[j])
                             : softfuse_test::logit_error(epsilon<T>(), in, peak[j], z[i * out + j] - b[j], 0) +
                                   // the double reference's own rounding of z + b
                                   softfuse_test::logit_error(epsilon<double>(), 0, 0, z[i * out + j], b[j]);
    }
  }
};

struct ErrorSummary {
  double max_rel   = 0;  // largest relative error found
  double max_ratio = 0;  // largest error / tolerance
  std::size_t bad  = 0;
};

/// Compares y with the reference ref, element by element, within the relative tolerance tol; where the
/// reference is NaN or infinite, y must be the same. Reports the first failures and prints the worst error
/// found (verbose).
template <class T>
ErrorSummary expect_close(const std::vector<T>& y, const std::vector<double>& ref, const std::vector<double>& tol,
                          std::size_t cols, const std::string& what, bool verbose = true) {
  ErrorSummary s;
  EXPECT_EQ(y.size(), ref.size()) << what;
  for (std::size_t k = 0; k < y.size() && k < ref.size(); ++k) {
    const double v = y[k], r = ref[k], err = std::abs(v - r);
    if (!std::isfinite(r)) {
      if (!(v == r || (std::isnan(v) && std::isnan(r))) && s.bad++ < 5)
        ADD_FAILURE() << what << ": element (" << k / cols << ", " << k % cols << ") = " << v << ", reference " << r;
      continue;
    }
    // denorm_min: a reference that underflowed to 0 was below it (matters only for huge tolerances).
    const double allowed = tol[k] * (std::abs(r) + std::numeric_limits<double>::denorm_min()) + tiny<T>();
    if (std::abs(r) >= tiny<T>()) s.max_rel = std::max(s.max_rel, err / std::abs(r));
    s.max_ratio = std::max(s.max_ratio, err / allowed);
    if (!(err <= allowed) && s.bad++ < 5)
      ADD_FAILURE() << what << ": element (" << k / cols << ", " << k % cols << ") = " << v << ", reference " << r
                    << ", relative error " << err / std::abs(r) << ", tolerance " << tol[k];
  }
  EXPECT_EQ(s.bad, 0u) << what;
  if (verbose) std::printf("    %-72s max rel err %.2e (%.3f of tolerance)\n", what.c_str(), s.max_rel, s.max_ratio);
  return s;
}

/// The reference of linear_gelu_softmax on `lin`: y's values and relative tolerances (row-major batch x out).
template <class T>
void gelu_reference(const Linear<T>& lin, bool exact, std::vector<double>& ref, std::vector<double>& tol) {
  std::vector<double> z, e, row_tol;
  lin.reference(z, e);
  ref.assign(lin.batch * lin.out, 0.0);
  tol.assign(lin.batch * lin.out, 0.0);
  for (std::size_t i = 0; i < lin.batch; ++i) {
    softfuse_test::reference_gelu_softmax_row(z.data() + i * lin.out, e.data() + i * lin.out, lin.out, exact,
                                              epsilon<T>(), ref.data() + i * lin.out, row_tol);
    std::copy(row_tol.begin(), row_tol.end(), tol.begin() + i * lin.out);
  }
}

using softfuse::BatchNormMode;

/// A Linear layer with BatchNorm parameters and state, and the scale (1 element, or one per feature).
template <class T>
struct BatchNormCase {
  Linear<T> lin;
  std::vector<T> gamma, beta, running_mean, running_var, scale;

  BatchNormCase(const Linear<T>& l, bool vector_scale, std::uint64_t seed)
      : lin(l),
        gamma(random_values<T>(l.out, -1.5, 1.5, seed + 10)),
        beta(random_values<T>(l.out, -0.5, 0.5, seed + 11)),
        running_mean(random_values<T>(l.out, -0.2, 0.2, seed + 12)),
        running_var(random_values<T>(l.out, 0.5, 1.5, seed + 13)),
        scale(vector_scale ? random_values<T>(l.out, 0.5, 3.0, seed + 14) : std::vector<T>{T(2.5)}) {}
};

/// The reference of successive linear_batchnorm_softmax steps on a BatchNormCase: the running statistics, with
/// their error bounds carried from step to step, and each step's y with its relative tolerances.
template <class T>
struct BatchNormReference {
  std::vector<double> rm, rv, tol_rm, tol_rv;

  explicit BatchNormReference(const BatchNormCase<T>& c)
      : rm(to_double(c.running_mean)), rv(to_double(c.running_var)), tol_rm(c.lin.out, 0.0), tol_rv(c.lin.out, 0.0) {}

  /// y's reference and tolerances (row-major batch x out) for a step on c.lin.x; updates the running
  /// statistics in training mode.
  void step(const BatchNormCase<T>& c, BatchNormMode mode, double bn_eps, double momentum, std::vector<double>& ref,
            std::vector<double>& tol) {
    const Linear<T>& lin  = c.lin;
    const std::size_t out = lin.out;
    std::vector<double> z, e;
    lin.reference(z, e, mode == BatchNormMode::inference);
    softfuse_test::FeatureStats stats;
    if (mode == BatchNormMode::training) {
      stats = softfuse_test::reference_batch_stats(z, e, lin.batch, out);
      softfuse_test::reference_running_update(stats, lin.batch, momentum, epsilon<T>(), rm, rv, tol_rm, tol_rv);
    } else {
      stats = {rm, rv, std::vector<double>(out)};
      for (std::size_t j = 0; j < out; ++j) stats.err[j] = 2 * epsilon<T>() * std::abs(lin.b[j] - rm[j]);
    }
    const auto gamma = to_double(c.gamma), beta = to_double(c.beta), sc = to_double(c.scale);
    std::vector<double> row_tol;
    ref.assign(lin.batch * out, 0.0);
    tol.assign(lin.batch * out, 0.0);
    for (std::size_t i = 0; i < lin.batch; ++i) {
      softfuse_test::reference_batchnorm_softmax_row(z.data() + i * out, e.data() + i * out, stats, gamma.data(),
                                                     beta.data(), sc.data(), sc.size(), bn_eps, out, epsilon<T>(),
                                                     ref.data() + i * out, row_tol);
      std::copy(row_tol.begin(), row_tol.end(), tol.begin() + i * out);
    }
  }

  /// Checks the running statistics after the steps so far: in inference mode unchanged (exactly), in training
  /// mode against the reference.
  void expect_running(const BatchNormCase<T>& c, BatchNormMode mode, const std::vector<T>& rm_out,
                      const std::vector<T>& rv_out, const std::string& at, bool verbose = true) const {
    if (mode == BatchNormMode::inference) {
      EXPECT_EQ(rm_out, c.running_mean) << at << ": inference changed running_mean";
      EXPECT_EQ(rv_out, c.running_var) << at << ": inference changed running_var";
      return;
    }
    const std::size_t out = rm.size();
    std::vector<double> rel_m(out), rel_v(out);
    for (std::size_t j = 0; j < out; ++j) {  // expect_close takes relative tolerances
      rel_m[j] = tol_rm[j] / std::max(std::abs(rm[j]), tiny<T>());
      rel_v[j] = tol_rv[j] / std::max(std::abs(rv[j]), tiny<T>());
    }
    expect_close(rm_out, rm, rel_m, out, at + " running_mean", verbose);
    expect_close(rv_out, rv, rel_v, out, at + " running_var", verbose);
  }
};

/// How much a GEMM precision mode widens the fp32 error bounds: its unit roundoff over fp32's (tf32: inputs
/// rounded to 2^-11; tf32x3: the dropped low x low product and the low parts' rounding, ~2^-21).
inline double mode_factor(softfuse::Precision p) {
  return p == softfuse::Precision::tf32     ? softfuse_test::tf32_error_factor
         : p == softfuse::Precision::tf32x3 ? softfuse_test::tf32x3_error_factor
                                            : 1.0;
}

inline const char* mode_name(softfuse::Precision p) {
  return p == softfuse::Precision::tf32 ? "tf32" : p == softfuse::Precision::tf32x3 ? "tf32x3" : "fp32";
}

/// Calls f() and expects std::invalid_argument whose message holds every one of `parts`.
template <class F>
void expect_invalid_argument(F&& f, const std::vector<std::string>& parts, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << what << ": no exception";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    for (const auto& p : parts) EXPECT_NE(m.find(p), std::string::npos) << what << ": \"" << p << "\" not in: " << m;
  }
}

}  // namespace TestLinearLayers

#endif
