// Correctness of softfuse's CUDA fused layers (cuda_specialized/linear.hpp) without Kokkos: every layer
// (GELU exact and tanh, BatchNorm training and inference) in every GEMM precision on odd shapes, padded and
// misaligned rows, the cooperative training kernel and the full workload, against the double-precision
// reference (tests/reference) on fp64 logits (cuBLAS DGEMM).
//
//   test_linear_kernels [--sanitize]     --sanitize: small shapes only (for compute-sanitizer)
// Exit status: 0 when every check passes, 1 when one fails, 2 when a CUDA call fails, 77 (skipped) without
// a CUDA device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cuda_check.hpp"
#include "linear_kernels_problem.hpp"
#include "softfuse/cuda_specialized/linear.hpp"
#include "softfuse_reference_layers.hpp"

// fp64 reference of a layer from the problem's fp64 logits; `steps` training calls update the running
// statistics (returned too). The tolerances are this test's own (below): no error bounds go in.
struct Reference {
  std::vector<double> y, rmean, rvar;
};
static Reference reference(const Problem& p, Layer l, int steps) {
  namespace ref       = softfuse_test;
  const std::size_t B = static_cast<std::size_t>(p.batch), N = static_cast<std::size_t>(p.out);
  Reference r{std::vector<double>(B * N), std::vector<double>(p.rmean.begin(), p.rmean.end()),
              std::vector<double>(p.rvar.begin(), p.rvar.end())};
  const std::vector<double> no_error(B * N, 0.0);
  ref::FeatureStats stats{r.rmean, r.rvar, std::vector<double>(N, 0.0)};  // inference: the running statistics
  if (l == Layer::bn_train) {
    stats = ref::reference_batch_stats(p.z64, no_error, B, N);
    std::vector<double> tol_mean(N), tol_var(N);
    for (int k = 0; k < steps; ++k)
      ref::reference_running_update(stats, B, 0.1, 0.0, r.rmean, r.rvar, tol_mean, tol_var);
  }
  const std::vector<double> gamma(p.gamma.begin(), p.gamma.end()), beta(p.beta.begin(), p.beta.end()),
      scale(p.scale.begin(), p.scale.end());
#pragma omp parallel for
  for (std::int64_t i = 0; i < p.batch; ++i) {
    const std::size_t row = static_cast<std::size_t>(i) * N;
    std::vector<double> tol;
    if (l == Layer::gelu_exact || l == Layer::gelu_tanh)
      ref::reference_gelu_softmax_row(&p.z64[row], &no_error[row], N, l == Layer::gelu_exact, 0.0, &r.y[row], tol);
    else
      ref::reference_batchnorm_softmax_row(&p.z64[row], &no_error[row], stats, gamma.data(), beta.data(), scale.data(),
                                           scale.size(), 1e-5, N, 0.0, &r.y[row], tol);
  }
  return r;
}

static int failures = 0;

struct Errors {
  double y_max_abs = 0, y_norm = 0, row_sum = 0, stats = 0;
  bool padding_ok = true;
};

static Errors compare(const Problem& p, const DevProblem& d, const Reference& r, bool stats) {
  Errors e;
  const std::vector<float> y = d.y.get();
  double num = 0, den = 0;
  for (std::int64_t i = 0; i < p.batch; ++i) {
    double rs = 0;
    for (std::int64_t j = 0; j < p.ldy; ++j) {
      const float v = y[d.shift + i * p.ldy + j];
      if (j >= p.out) {
        e.padding_ok = e.padding_ok && std::isnan(v);
        continue;
      }
      const double ref = r.y[i * p.out + j], diff = std::fabs(v - ref);
      e.y_max_abs = std::max(e.y_max_abs, std::isnan(v) ? INFINITY : diff);
      num += diff * diff;
      den += ref * ref;
      rs += v;
    }
    e.row_sum = std::max(e.row_sum, std::fabs(rs - 1));
  }
  e.y_norm = std::sqrt(num / den);
  if (stats) {
    const std::vector<float> m = d.rmean.get(), v = d.rvar.get();
    for (std::int64_t j = 0; j < p.out; ++j)
      e.stats = std::max({e.stats, std::fabs(m[j] - r.rmean[j]) / (std::fabs(r.rmean[j]) + 1),
                          std::fabs(v[j] - r.rvar[j]) / r.rvar[j]});
  }
  return e;
}

// Tolerances from the GEMM precision: the softmax carries the logits' absolute error into relative
// output error; a norm-wise y error bound per mode (measured values are printed and kept).
static double tolerance(sc::GemmPrecision prec) { return prec == sc::GemmPrecision::tf32 ? 5e-3 : 2e-5; }

static void check_case(const Problem& p, const char* label, std::int64_t shift, const std::vector<Layer>& layers,
                       bool presplit = true) {
  for (Layer l : layers) {
    const Reference r = reference(p, l, l == Layer::bn_train ? 3 : 0);
    for (sc::GemmPrecision prec : {sc::GemmPrecision::fp32, sc::GemmPrecision::tf32, sc::GemmPrecision::tf32x3}) {
      DevProblem d(p, shift);
      const int steps = l == Layer::bn_train ? 3 : 1;
      for (int k = 0; k < steps; ++k) d.run(p, l, prec, nullptr, presplit);
      CK(cudaDeviceSynchronize());
      const Errors e = compare(p, d, r, l == Layer::bn_train);
      // BatchNorm divides the logits' absolute error by the feature's spread: scale the bound by
      // max_j rms(z_j) / std(z_j) (1 for GELU).
      double cond = 1;
      if (l == Layer::bn_train)
        for (std::int64_t j = 0; j < p.out; ++j) {
          double s = 0, q = 0;
          for (std::int64_t i = 0; i < p.batch; ++i)
            s += p.z64[i * p.out + j], q += p.z64[i * p.out + j] * p.z64[i * p.out + j];
          const double mean = s / p.batch, var = q / p.batch - mean * mean;
          cond = std::max(cond, std::sqrt(q / p.batch / (std::max(var, 0.0) + 1e-5)));
        }
      const double tol = tolerance(prec) * cond;
      const bool ok    = e.padding_ok && e.y_norm <= tol && e.row_sum <= 1e-5 &&
                      e.stats <= 1e-5 + (prec == sc::GemmPrecision::tf32 ? 1e-3 : 0);
      failures += !ok;
      std::printf(
          "%s %-18s %-10s %-6s %ldx%ldx%ld ldy %ld shift %ld: y norm err %.2e max abs %.2e row sum %.1e stats %.1e%s\n",
          ok ? "ok  " : "FAIL", label, name(l), name(prec), long(p.batch), long(p.in), long(p.out), long(p.ldy),
          long(shift), e.y_norm, e.y_max_abs, e.row_sum, e.stats, e.padding_ok ? "" : " PADDING WRITTEN");
    }
  }
}

// The batch mean of a training step (seen through running_mean after one step) on the workload, x in [0, 1):
// the largest error over the features relative to the largest |running_mean|. fp32's rounding errors average
// out over the batch; tf32x3's do not (the tensor cores truncate their sums toward zero: a bias of a similar
// fraction of each logit, shared by all rows), so its bound is the one documented for Precision::tf32x3
// (measured 2.7e-6 against fp32's 1.2e-7 on the H200).
static void check_batch_mean(const Problem& p) {
  const std::size_t N = static_cast<std::size_t>(p.out);
  const auto stats    = softfuse_test::reference_batch_stats(p.z64, std::vector<double>(p.z64.size(), 0.0),
                                                             static_cast<std::size_t>(p.batch), N);
  std::vector<double> ref(N);
  double largest = 0;
  for (std::size_t j = 0; j < N; ++j)
    ref[j] = 0.9 * p.rmean[j] + 0.1 * stats.mean[j], largest = std::max(largest, std::fabs(ref[j]));
  for (sc::GemmPrecision prec : {sc::GemmPrecision::fp32, sc::GemmPrecision::tf32x3}) {
    DevProblem d(p);
    d.run(p, Layer::bn_train, prec);
    const std::vector<float> m = d.rmean.get();
    double err                 = 0;
    for (std::size_t j = 0; j < N; ++j) err = std::max(err, std::fabs(m[j] - ref[j]));
    const double bound = prec == sc::GemmPrecision::fp32 ? 4e-7 : 5e-6;
    const bool ok      = err / largest <= bound;
    failures += !ok;
    std::printf(
        "%s batch_mean         bn_train   %-6s %ldx%ldx%ld: running_mean error %.2e of its largest magnitude "
        "(bound %.0e)\n",
        ok ? "ok  " : "FAIL", name(prec), long(p.batch), long(p.in), long(p.out), err / largest, bound);
  }
}

// DefaultCachePreference, the scope the GEMM launches in: the driver's default inside, the caller's preference
// (here shared memory, as Kokkos' CUDA initialization sets it) restored after the scope and after a layer.
static void check_cache_preference() {
  CK(cudaDeviceSetCacheConfig(cudaFuncCachePreferShared));
  cudaFuncCache inside = cudaFuncCachePreferShared, after_scope = cudaFuncCachePreferNone,
                after_layer = cudaFuncCachePreferNone;
  {
    const sc::DefaultCachePreference scope;
    CK(cudaDeviceGetCacheConfig(&inside));
  }
  CK(cudaDeviceGetCacheConfig(&after_scope));
  const Problem p = make_problem(3, 33, 100, 100, false);
  DevProblem d(p);
  d.run(p, Layer::gelu_exact, sc::GemmPrecision::fp32);
  CK(cudaDeviceSynchronize());
  CK(cudaDeviceGetCacheConfig(&after_layer));
  CK(cudaDeviceSetCacheConfig(cudaFuncCachePreferNone));
  const bool ok = inside == cudaFuncCachePreferNone && after_scope == cudaFuncCachePreferShared &&
                  after_layer == cudaFuncCachePreferShared;
  failures += !ok;
  std::printf(
      "%s cache_preference   inside the GEMM's scope %d (none: %d), after it %d, after a layer %d (shared: %d)\n",
      ok ? "ok  " : "FAIL", int(inside), int(cudaFuncCachePreferNone), int(after_scope), int(after_layer),
      int(cudaFuncCachePreferShared));
}

static void checks(bool small) {
  check_cache_preference();
  const std::vector<Layer> all{Layer::gelu_exact, Layer::gelu_tanh, Layer::bn_train, Layer::bn_infer};
  const std::vector<Layer> infer{Layer::gelu_exact, Layer::gelu_tanh, Layer::bn_infer};
  check_case(make_problem(1, 37, 50, 50, false), "batch1", 0, infer);
  check_case(make_problem(3, 33, 1000, 1000, true), "batch3", 0, all);
  check_case(make_problem(7, 8, 17, 19, false), "odd_padded", 1, all);
  check_case(make_problem(5, 0, 12, 12, false), "in0", 0, all);
  check_case(make_problem(16, 40, 24, 24, true), "split_per_call", 0, all, false);
  // the cooperative training kernel (out 4096: 32 blocks of 8 rows joining 128 features each)
  check_case(make_problem(256, 16, 4096, 4096, true), "coop_4096", 0, {Layer::bn_train});
  if (small) return;
  // the cooperative training kernel on padded rows (ldy 8200), and with 132 blocks (63 features each)
  check_case(make_problem(512, 64, 8192, 8200, false), "coop_b512_ldy", 0, {Layer::bn_train});
  check_case(make_problem(1056, 48, 8192, 8192, true), "coop_b1056", 0, {Layer::bn_train});
  check_case(make_problem(1000, 250, 333, 340, true), "b1000_odd", 3, all);
  check_case(make_problem(64, 256, 512, 512, false, 1e3), "mean1e3", 0, {Layer::bn_train});
  const Problem workload = make_problem(1024, 8192, 8192, 8192, false);
  check_case(workload, "workload", 0, {Layer::gelu_exact, Layer::bn_train, Layer::bn_infer});
  check_batch_mean(workload);
}

int main(int argc, char** argv) {
  bool small = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--sanitize"))
      small = true;
    else {
      std::fprintf(stderr, "usage: %s [--sanitize]\n", argv[0]);
      return 2;
    }
  }
  if (!softfuse_test::cuda_device_present()) return softfuse_test::kNoDevice;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, linear_max_out %ld\n", prop.name, long(sc::linear_max_out(0)));
  try {
    checks(small);
  } catch (const std::exception& e) {
    std::printf("EXCEPTION %s\n", e.what());
    return 3;
  }
  std::printf("%s: %d failed\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
