#ifndef SOFTFUSE_TESTS_REFERENCE_LAYERS_HPP
#define SOFTFUSE_TESTS_REFERENCE_LAYERS_HPP

// Double-precision references of the fused layers (plain loops, independent of the library), and the error
// model that turns them into tolerances for a layer computed in a floating-point type of epsilon `eps`.
// All arrays are row-major: x [batch, in], w [out, in], z and y [batch, out].
//
// Error model. A fp sum's rounding errors are eps times its partial sums, with random signs: they add up like
// a random walk, to about sqrt(in) eps max_k |S_k| (S_k the partial sums of x_k w_k; blocked and split BLAS
// orders have partial sums of the same size). So each logit z = x·wᵀ + b of a GEMM in T is off by about
// e = 2 eps (sqrt(in) max_k |S_k| + |z| + |b|), the last terms for the rounding of its value: logit_error(),
// with a safety factor of 2. Softmax input errors |Δu_k| <= du_k scale y_j = exp(u_j) / Σ_k exp(u_k) by a factor
// within exp(±(du_j + max_k du_k)), so |Δy_j / y_j| <= expm1(du_j + max_k du_k) (about du_j + max_k du_k when
// small; unbounded once the errors reach the gaps between the u, where only y in [0, 1] is left), plus a few
// roundings for exp, sum and division, and the row sum's roundings, which the library keeps in double whatever
// T (n times double's epsilon for n columns): softmax_tolerance().

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "softfuse_reference.hpp"

namespace softfuse_test {

/// z[j] = Σ_k x[k] w[j, k] + b[j] in double for one row x [in], and peak[j] = max_k |Σ_{k' <= k} x[k'] w[j, k']|.
template <class T>
void reference_linear_row(const T* x, const T* w, const T* b, std::size_t in, std::size_t out, double* z,
                          double* peak) {
  for (std::size_t j = 0; j < out; ++j) {
    double s = 0, p = 0;
    for (std::size_t k = 0; k < in; ++k) {
      s += static_cast<double>(x[k]) * static_cast<double>(w[j * in + k]);
      p = std::max(p, std::abs(s));
    }
    z[j]    = s + static_cast<double>(b[j]);
    peak[j] = p;
  }
}

inline double reference_gelu(double z, bool exact) {
  if (exact) return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
  const double pi = 3.14159265358979323846;
  return 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (z + 0.044715 * z * z * z)));
}

/// The error model of a GEMM on tensor cores: its bounds are the fp32 ones times the mode's unit roundoff over
/// fp32's. tf32 rounds the inputs to 2^-11 (2^13 times fp32's 2^-24); tf32x3 drops the low x low product and
/// rounds the low parts, about 2^-21 (8 times).
constexpr double tf32_error_factor = 8192.0, tf32x3_error_factor = 8.0;

/// Error bound of one logit (see the model above).
inline double logit_error(double eps, std::size_t in, double peak, double z, double b) {
  return 2 * eps * (std::sqrt(static_cast<double>(in)) * peak + std::abs(z) + std::abs(b));
}

/// Relative tolerance of y[j] given the softmax inputs' error bounds du [n] of one row. Both the kernel and
/// this reference add the row's n exponentials in double, each sum within (n - 1) 2^-53 of exact: n times
/// double's epsilon in all (it matters for long double rows only).
inline void softmax_tolerance(const std::vector<double>& du, double eps, std::vector<double>& tol) {
  const double worst = du.empty() ? 0.0 : *std::max_element(du.begin(), du.end());
  const double sums  = static_cast<double>(du.size()) * std::numeric_limits<double>::epsilon();
  tol.resize(du.size());
  for (std::size_t j = 0; j < du.size(); ++j) tol[j] = std::expm1(du[j] + worst + 16 * eps + sums);
}

/// One row of Linear -> GELU -> softmax from its logits z [out] and their error bounds e: y [out] and its
/// relative tolerance.
inline void reference_gelu_softmax_row(const double* z, const double* e, std::size_t out, bool exact, double eps,
                                       double* y, std::vector<double>& tol) {
  std::vector<double> u(out), du(out);
  for (std::size_t j = 0; j < out; ++j) {
    u[j] = reference_gelu(z[j], exact);
    // |gelu'| <= 1.13; erf / tanh and the products round to a few eps of |z|.
    du[j] = 1.13 * e[j] + 8 * eps * (std::abs(z[j]) + 1);
  }
  reference_softmax_row(u.data(), y, out);
  softmax_tolerance(du, eps, tol);
}

/// Per-feature statistics of BatchNorm: what normalizes (mean, var) and their error bound `err` (the largest
/// logit error of the feature in training mode; the rounding of bias - running_mean in inference mode).
struct FeatureStats {
  std::vector<double> mean, var, err;
};

/// Batch statistics of z [batch, out] (two-pass, biased variance), err from the logit errors e [batch, out].
/// The mean gets one correction pass (the mean of z - mean), so its own rounding stays at an ulp or so even
/// where the mean is huge against the spread (a bias of 1e17 on logits of spread 1).
inline FeatureStats reference_batch_stats(const std::vector<double>& z, const std::vector<double>& e, std::size_t batch,
                                          std::size_t out) {
  FeatureStats s{std::vector<double>(out, 0.0), std::vector<double>(out, 0.0), std::vector<double>(out, 0.0)};
  const double n = static_cast<double>(batch);
  for (std::size_t i = 0; i < batch; ++i)
    for (std::size_t j = 0; j < out; ++j) s.mean[j] += z[i * out + j] / n;
  std::vector<double> correction(out, 0.0);
  for (std::size_t i = 0; i < batch; ++i)
    for (std::size_t j = 0; j < out; ++j) correction[j] += (z[i * out + j] - s.mean[j]) / n;
  for (std::size_t j = 0; j < out; ++j)
    if (std::isfinite(s.mean[j])) s.mean[j] += correction[j];
  for (std::size_t i = 0; i < batch; ++i)
    for (std::size_t j = 0; j < out; ++j) {
      const double d = z[i * out + j] - s.mean[j];
      s.var[j] += d * d / static_cast<double>(batch);
      s.err[j] = std::max(s.err[j], e[i * out + j]);
    }
  return s;
}

/// The running-statistics update in training mode, with its error bound carried along in tol_mean / tol_var.
inline void reference_running_update(const FeatureStats& s, std::size_t batch, double momentum, double eps,
                                     std::vector<double>& running_mean, std::vector<double>& running_var,
                                     std::vector<double>& tol_mean, std::vector<double>& tol_var) {
  const double n = static_cast<double>(batch);
  for (std::size_t j = 0; j < running_mean.size(); ++j) {
    running_mean[j]   = (1 - momentum) * running_mean[j] + momentum * s.mean[j];
    running_var[j]    = (1 - momentum) * running_var[j] + momentum * s.var[j] * n / (n - 1);
    const double dvar = 2 * std::sqrt(s.var[j]) * s.err[j] + s.err[j] * s.err[j] + 8 * eps * s.var[j];
    tol_mean[j]       = (1 - momentum) * tol_mean[j] + 2 * momentum * s.err[j] + 2 * eps * std::abs(running_mean[j]);
    tol_var[j]        = (1 - momentum) * tol_var[j] + 2 * momentum * dvar * n / (n - 1) + 2 * eps * running_var[j];
  }
}

/// One row of BatchNorm -> scale -> softmax from its logits z, normalized by `s` (batch or running statistics).
/// gamma, beta [out], scale [1] or [out] (scale_n elements); y [out] and its relative tolerance.
inline void reference_batchnorm_softmax_row(const double* z, const double* e, const FeatureStats& s,
                                            const double* gamma, const double* beta, const double* scale,
                                            std::size_t scale_n, double bn_eps, std::size_t out, double eps, double* y,
                                            std::vector<double>& tol) {
  std::vector<double> u(out), du(out);
  for (std::size_t j = 0; j < out; ++j) {
    const double sc = scale[scale_n == 1 ? 0 : j], sd = std::sqrt(s.var[j] + bn_eps);
    const double n = (z[j] - s.mean[j]) / sd, mul = std::abs(sc * gamma[j] / sd);
    u[j] = sc * (gamma[j] * n + beta[j]);
    // The logit's own error, the statistics' (mean: err; std: about err, scaled by |n|), and the roundings.
    du[j] = mul * (e[j] + s.err[j] * (1 + std::abs(n))) +
            8 * eps * (std::abs(u[j]) + std::abs(sc * beta[j]) + std::abs(sc * gamma[j] * n) + 1);
  }
  reference_softmax_row(u.data(), y, out);
  softmax_tolerance(du, eps, tol);
}

}  // namespace softfuse_test

#endif
