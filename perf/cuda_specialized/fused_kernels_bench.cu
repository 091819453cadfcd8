// Standalone check and benchmark of softfuse's CUDA fused layers (cuda_specialized/linear.hpp):
// Linear -> GELU -> softmax and Linear -> BatchNorm1d -> scale -> softmax in the three GEMM
// precisions, against cuBLAS alone and an fp64 reference (cuBLAS DGEMM for the logits, the rest
// in double on the host). Build (from the repository root):
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 \
//        -Xcompiler -fopenmp -Icuda_specialized/include -Icuda_specialized/src \
//        perf/cuda_specialized/fused_kernels_bench.cu cuda_specialized/src/*.cu -lcublasLt -lcublas \
//        -o build_gpu/fused_kernels_bench
//
//   --check           every layer x precision on odd shapes and the full workload, against fp64
//   --check-sanitize  small shapes only (for compute-sanitizer)
//   --bench           the 1024 x 8192 x 8192 workload: GEMMs alone, tf32x3 slice sweep, the layers
//                     timed interleaved with the matching cuBLAS GEMM alone
//   --explore         cuBLASLt options that could take work off the layers (split-K for the high x
//                     high product, BatchNorm folded into an alpha-vector epilogue)
//   --tune            cuBLASLt configurations of the training layer's TF32 GEMM around the
//                     heuristic's candidates, the fastest against cuBLAS alone (measured: none faster,
//                     perf/results/h100_session7_2026-11-22.txt)
//   --quick           the tf32 layers and the TF32 GEMM alone timed call by call interleaved, three
//                     rounds (A/B tests of the row work); --rounds N rounds, --cool S seconds idle
//                     before each round (every round at full clocks)
//   --split-proto     the BatchNorm-training GEMM cut into two halves of the features, in sequence or
//                     concurrently, the first half's statistics beside the second half's GEMM
//                     (measured: no gain, the cut GEMM costs what the overlap saves;
//                     perf/results/h100_fused_session4_2026-11-22.txt, h100_session7_2026-11-22.txt)
//   --profile         one call per layer and GEMM precision on the workload, for
//                     `ncu --clock-control none --metrics gpu__time_duration.sum --csv ... --profile`
//   --json PATH       results as JSON;  --iters N  timed repetitions (default 20)
// Exit status non-zero when a check fails.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "linear_impl.hpp"
#include "softfuse/cuda_specialized/linear.hpp"

namespace sc = softfuse::cuda_specialized;

#define CK(call)                                                                                        \
  do {                                                                                                  \
    cudaError_t e_ = (call);                                                                            \
    if (e_ != cudaSuccess) {                                                                            \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__);    \
      std::exit(2);                                                                                     \
    }                                                                                                   \
  } while (0)
#define CB(call)                                                                      \
  do {                                                                                \
    if ((call) != CUBLAS_STATUS_SUCCESS) {                                            \
      std::fprintf(stderr, "cuBLAS error at %s:%d\n", __FILE__, __LINE__);            \
      std::exit(2);                                                                   \
    }                                                                                 \
  } while (0)

static std::uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double uniform() {  // [0, 1)
  std::uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return double((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

template <class T>
struct Dev {
  T* p = nullptr;
  std::size_t n = 0;
  explicit Dev(std::size_t count) : n(count) { CK(cudaMalloc(&p, sizeof(T) * std::max<std::size_t>(n, 1))); }
  ~Dev() { cudaFree(p); }
  void put(const std::vector<T>& h) { CK(cudaMemcpy(p, h.data(), sizeof(T) * n, cudaMemcpyHostToDevice)); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    CK(cudaMemcpy(h.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost));
    return h;
  }
};

static cublasHandle_t blas() {
  static cublasHandle_t h = [] {
    cublasHandle_t x;
    CB(cublasCreate(&x));
    return x;
  }();
  return h;
}

// A problem: x [batch, in] uniform [0, 1), weight [out, in] and bias uniform in +-1/sqrt(in) (the
// reference framework's Linear initialization), BatchNorm parameters around their defaults.
struct Problem {
  std::int64_t batch, in, out, ldy;
  std::vector<float> x, w, b, gamma, beta, rmean, rvar, scale;
  std::vector<double> z64;  // fp64 logits x wᵀ + b
};

static Problem make_problem(std::int64_t batch, std::int64_t in, std::int64_t out, std::int64_t ldy, bool vector_scale,
                            double bias_offset = 0) {
  Problem p{batch, in, out, ldy};
  const double r = 1 / std::sqrt(double(std::max<std::int64_t>(in, 1)));
  p.x.resize(batch * in);
  p.w.resize(out * in);
  p.b.resize(out);
  for (auto& v : p.x) v = float(uniform());
  for (auto& v : p.w) v = float((2 * uniform() - 1) * r);
  for (auto& v : p.b) v = float((2 * uniform() - 1) * r + bias_offset);
  p.gamma.resize(out);
  p.beta.resize(out);
  p.rmean.resize(out);
  p.rvar.resize(out);
  for (std::int64_t j = 0; j < out; ++j) {
    p.gamma[j] = float(0.5 + uniform());
    p.beta[j] = float(uniform() - 0.5);
    p.rmean[j] = float(bias_offset + 0.2 * (uniform() - 0.5));
    p.rvar[j] = float(0.5 + uniform());
  }
  p.scale.assign(vector_scale ? out : 1, 0.f);
  for (auto& v : p.scale) v = float(0.5 + 2 * uniform());
  // fp64 logits on the device (cuBLAS DGEMM: fp64 FMA throughout)
  Dev<double> xd(batch * in), wd(out * in), zd(batch * out);
  xd.put(std::vector<double>(p.x.begin(), p.x.end()));
  wd.put(std::vector<double>(p.w.begin(), p.w.end()));
  const double one = 1, zero = 0;
  if (in > 0 && batch > 0 && out > 0)
    CB(cublasDgemm(blas(), CUBLAS_OP_T, CUBLAS_OP_N, int(out), int(batch), int(in), &one, wd.p, int(in), xd.p, int(in),
                   &zero, zd.p, int(out)));
  else
    CK(cudaMemset(zd.p, 0, sizeof(double) * zd.n));
  CK(cudaDeviceSynchronize());
  p.z64 = zd.get();
  for (std::int64_t i = 0; i < batch; ++i)
    for (std::int64_t j = 0; j < out; ++j) p.z64[i * out + j] += p.b[j];
  return p;
}

enum class Layer { gelu_exact, gelu_tanh, bn_train, bn_infer };
static const char* name(Layer l) {
  return l == Layer::gelu_exact ? "gelu_exact" : l == Layer::gelu_tanh ? "gelu_tanh" : l == Layer::bn_train ? "bn_train" : "bn_infer";
}
static const char* name(sc::GemmPrecision p) {
  return p == sc::GemmPrecision::fp32 ? "fp32" : p == sc::GemmPrecision::tf32 ? "tf32" : "tf32x3";
}

// fp64 reference of a layer; steps training calls update the running statistics (returned too).
struct Reference {
  std::vector<double> y, rmean, rvar;
};
static Reference reference(const Problem& p, Layer l, int steps) {
  const std::int64_t B = p.batch, N = p.out;
  Reference r{std::vector<double>(B * N), std::vector<double>(p.rmean.begin(), p.rmean.end()),
              std::vector<double>(p.rvar.begin(), p.rvar.end())};
  std::vector<double> center(N), mul(N), add(N);
  if (l == Layer::bn_train || l == Layer::bn_infer) {
    for (std::int64_t j = 0; j < N; ++j) {
      double mean = p.rmean[j], var = p.rvar[j];
      if (l == Layer::bn_train) {
        double s = 0, q = 0;
        for (std::int64_t i = 0; i < B; ++i) s += p.z64[i * N + j];
        mean = s / B;
        for (std::int64_t i = 0; i < B; ++i) q += (p.z64[i * N + j] - mean) * (p.z64[i * N + j] - mean);
        var = q / B;
        for (int k = 0; k < steps; ++k) {
          r.rmean[j] = 0.9 * r.rmean[j] + 0.1 * mean;
          r.rvar[j] = 0.9 * r.rvar[j] + 0.1 * var * B / (B - 1);
        }
      }
      const double s = p.scale[p.scale.size() == 1 ? 0 : j];
      center[j] = mean;
      mul[j] = s * p.gamma[j] / std::sqrt(var + 1e-5);
      add[j] = s * p.beta[j];
    }
  }
#pragma omp parallel for
  for (std::int64_t i = 0; i < B; ++i) {
    double m = -INFINITY, s = 0;
    std::vector<double> u(N);
    for (std::int64_t j = 0; j < N; ++j) {
      const double z = p.z64[i * N + j];
      u[j] = l == Layer::gelu_exact ? 0.5 * z * (1 + std::erf(z / std::sqrt(2.0)))
             : l == Layer::gelu_tanh ? 0.5 * z * (1 + std::tanh(std::sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)))
                                     : (z - center[j]) * mul[j] + add[j];
      m = std::max(m, u[j]);
    }
    for (std::int64_t j = 0; j < N; ++j) s += std::exp(u[j] - m);
    for (std::int64_t j = 0; j < N; ++j) r.y[i * N + j] = std::exp(u[j] - m) / s;
  }
  return r;
}

// Device copies of a problem's operands (y with pitch ldy, offset by `shift` floats to test
// misaligned rows).
struct DevProblem {
  Dev<float> x, w, b, gamma, beta, rmean, rvar, scale, y, split, ws;
  std::int64_t shift;
  DevProblem(const Problem& p, std::int64_t shift_ = 0)
      : x(p.x.size()), w(p.w.size()), b(p.b.size()), gamma(p.out), beta(p.out), rmean(p.out), rvar(p.out),
        scale(p.scale.size()), y(p.batch * p.ldy + shift_), split(2 * p.w.size()), ws(3 * p.out), shift(shift_) {
    x.put(p.x);
    w.put(p.w);
    b.put(p.b);
    gamma.put(p.gamma);
    beta.put(p.beta);
    reset_stats(p);
    scale.put(p.scale);
    CK(cudaMemset(y.p, 0xff, sizeof(float) * y.n));  // NaN padding: must stay untouched
    sc::split_weight_tf32x3(w.p, p.in, p.out, p.in, split.p, 2 * p.in, nullptr);
  }
  void reset_stats(const Problem& p) {
    rmean.put(p.rmean);
    rvar.put(p.rvar);
  }
  sc::LinearOperands ops(const Problem& p, sc::GemmPrecision prec, bool presplit = true) const {
    return {x.p, p.in, w.p, p.in, b.p, y.p + shift, p.ldy, p.batch, p.in, p.out, prec,
            presplit ? split.p : nullptr, 2 * p.in};
  }
  void run(const Problem& p, Layer l, sc::GemmPrecision prec, cudaStream_t s = nullptr, bool presplit = true) {
    const sc::LinearOperands o = ops(p, prec, presplit);
    if (l == Layer::gelu_exact || l == Layer::gelu_tanh) {
      sc::linear_gelu_softmax(o, l == Layer::gelu_exact, s);
    } else {
      const sc::BatchNormOperands bn{gamma.p, beta.p, rmean.p, rvar.p, scale.p, std::int64_t(scale.n),
                                     l == Layer::bn_train, 1e-5, 0.1, presplit ? ws.p : nullptr};
      sc::linear_batchnorm_softmax(o, bn, s);
    }
  }
};

// cuBLAS alone, the layers' baseline: d.y = x · weightᵀ (no bias), as SGEMM in strict fp32
// (CUBLAS_PEDANTIC_MATH) or on TF32 tensor cores. Leaves that math mode set.
static void cublas_alone(const Problem& p, const DevProblem& d, bool tf32) {
  const float one = 1, zero = 0;
  const int n = int(p.out), b = int(p.batch), k = int(p.in), ldy = int(p.ldy);
  if (tf32) {
    CB(cublasSetMathMode(blas(), CUBLAS_TF32_TENSOR_OP_MATH));
    CB(cublasGemmEx(blas(), CUBLAS_OP_T, CUBLAS_OP_N, n, b, k, &one, d.w.p, CUDA_R_32F, k, d.x.p, CUDA_R_32F, k, &zero,
                    d.y.p, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
  } else {
    CB(cublasSetMathMode(blas(), CUBLAS_PEDANTIC_MATH));
    CB(cublasSgemm(blas(), CUBLAS_OP_T, CUBLAS_OP_N, n, b, k, &one, d.w.p, k, d.x.p, k, &zero, d.y.p, ldy));
  }
}

static int failures = 0;
static std::string json_checks;

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
static double tolerance(sc::GemmPrecision prec) {
  return prec == sc::GemmPrecision::tf32 ? 5e-3 : 2e-5;
}

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
          for (std::int64_t i = 0; i < p.batch; ++i) s += p.z64[i * p.out + j], q += p.z64[i * p.out + j] * p.z64[i * p.out + j];
          const double mean = s / p.batch, var = q / p.batch - mean * mean;
          cond = std::max(cond, std::sqrt(q / p.batch / (std::max(var, 0.0) + 1e-5)));
        }
      const double tol = tolerance(prec) * cond;
      const bool ok = e.padding_ok && e.y_norm <= tol && e.row_sum <= 1e-5 && e.stats <= 1e-5 + (prec == sc::GemmPrecision::tf32 ? 1e-3 : 0);
      failures += !ok;
      std::printf("%s %-18s %-10s %-6s %ldx%ldx%ld ldy %ld shift %ld: y norm err %.2e max abs %.2e row sum %.1e stats %.1e%s\n",
                  ok ? "ok  " : "FAIL", label, name(l), name(prec), long(p.batch), long(p.in), long(p.out),
                  long(p.ldy), long(shift), e.y_norm, e.y_max_abs, e.row_sum, e.stats, e.padding_ok ? "" : " PADDING WRITTEN");
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "%s{\"case\":\"%s\",\"layer\":\"%s\",\"precision\":\"%s\",\"batch\":%ld,\"in\":%ld,\"out\":%ld,"
                    "\"y_norm_err\":%.3e,\"y_max_abs_err\":%.3e,\"row_sum_err\":%.3e,\"running_stats_err\":%.3e,\"ok\":%s}",
                    json_checks.empty() ? "" : ",\n", label, name(l), name(prec), long(p.batch), long(p.in),
                    long(p.out), e.y_norm, e.y_max_abs, e.row_sum, e.stats, ok ? "true" : "false");
      json_checks += buf;
    }
  }
}

static void checks(bool small) {
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
  check_case(make_problem(1024, 8192, 8192, 8192, false), "workload", 0, {Layer::gelu_exact, Layer::bn_train, Layer::bn_infer});
}

// ------------------------------------------------------------------------------------------
// benchmark

static int iters = 20;

static double median_ms(const std::function<void()>& f) {
  for (int i = 0; i < 3; ++i) f();
  CK(cudaDeviceSynchronize());
  std::vector<cudaEvent_t> ev(2 * iters);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  for (int i = 0; i < iters; ++i) {
    CK(cudaEventRecord(ev[2 * i]));
    f();
    CK(cudaEventRecord(ev[2 * i + 1]));
  }
  CK(cudaDeviceSynchronize());
  std::vector<float> t(iters);
  for (int i = 0; i < iters; ++i) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
  for (auto& e : ev) CK(cudaEventDestroy(e));
  std::sort(t.begin(), t.end());
  return t[iters / 2];
}

static std::vector<double> interleaved_medians(const std::vector<std::function<void()>>& fs);
static void layers_vs_cublas(const Problem& p, DevProblem& d, sc::GemmPrecision prec, double early_ms);

static std::string json_bench;
static void record(const std::string& name, double ms, const std::string& extra = "") {
  std::printf("bench %-34s %8.4f ms %s\n", name.c_str(), ms, extra.c_str());
  json_bench += (json_bench.empty() ? "" : ",\n") + std::string("{\"name\":\"") + name + "\",\"ms\":" + std::to_string(ms) +
                (extra.empty() ? "" : "," + extra) + "}";
}

// Norm-wise error of device logits z (pitch out) against the fp64 ones.
static double logits_error(const Problem& p, const float* z) {
  std::vector<float> h(p.batch * p.out);
  CK(cudaMemcpy(h.data(), z, sizeof(float) * h.size(), cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (std::size_t i = 0; i < h.size(); ++i) {
    num += (h[i] - p.z64[i]) * (h[i] - p.z64[i]);
    den += p.z64[i] * p.z64[i];
  }
  return std::sqrt(num / den);
}

// cuBLASLt's heuristic candidates for yᵀ = Wᵀ·xᵀ (m = out, n = batch), each timed: with no
// workspace (what the library runs) and with a 32 MiB one.
static void lt_sweep(const Problem& p, DevProblem& d, cublasComputeType_t compute, std::int64_t k, bool beta_one,
                     const char* label) {
  static cublasLtHandle_t lt = [] {
    cublasLtHandle_t h;
    CB(cublasLtCreate(&h));
    return h;
  }();
  const std::int64_t m = p.out, n = p.batch;
  cublasLtMatmulDesc_t desc;
  CB(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  cublasLtMatrixLayout_t la, lb, lc;
  CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, k, m, p.in));
  CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, p.in));
  CB(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, p.ldy));
  Dev<char> work(32 << 20);
  for (std::size_t ws : {std::size_t(0), std::size_t(32) << 20}) {
    cublasLtMatmulPreference_t pref;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t res[8];
    int found = 0;
    CB(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 8, res, &found));
    const float one = 1, beta = beta_one ? 1.f : 0.f;
    for (int i = 0; i < found; ++i) {
      const double t = median_ms([&] {
        CB(cublasLtMatmul(lt, desc, &one, d.w.p, la, d.x.p, lb, &beta, d.y.p, lc, d.y.p, lc, &res[i].algo,
                          ws ? work.p : nullptr, ws, nullptr));
      });
      char extra[160];
      std::snprintf(extra, sizeof extra, "\"workspace_limit\":%zu,\"workspace\":%zu,\"rank\":%d,\"k\":%ld", ws,
                    res[i].workspaceSize, i, long(k));
      record(std::string("lt_sweep_") + label + "_ws" + std::to_string(ws >> 20) + "_" + std::to_string(i), t, extra);
    }
    cublasLtMatmulPreferenceDestroy(pref);
  }
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
}

static void bench() {
  const std::int64_t B = 1024, K = 8192, N = 8192;
  std::printf("building the fp64 reference logits...\n");
  const Problem p = make_problem(B, K, N, N, false);
  DevProblem d(p);
  char extra[128];
  // cuBLAS alone (no bias), matching precisions
  // logits error of the bias-free cuBLAS products
  Problem pb = p;
  for (std::int64_t i = 0; i < B; ++i)
    for (std::int64_t j = 0; j < N; ++j) pb.z64[i * N + j] -= p.b[j];
  lt_sweep(p, d, CUBLAS_COMPUTE_32F_FAST_TF32, K, false, "tf32");
  lt_sweep(p, d, CUBLAS_COMPUTE_32F_FAST_TF32, 1024, true, "tf32_slice1024");
  record("stream_alloc_64MB", median_ms([&] {
    softfuse::cuda_specialized::impl::StreamBuffer buf(std::size_t(64) << 20, nullptr, "bench");
  }));
  const double sg = median_ms([&] { cublas_alone(p, d, false); });
  std::snprintf(extra, sizeof extra, "\"logits_err\":%.3e", logits_error(pb, d.y.p));
  record("cublas_sgemm", sg, extra);
  const double tg = median_ms([&] { cublas_alone(p, d, true); });
  std::snprintf(extra, sizeof extra, "\"logits_err\":%.3e", logits_error(pb, d.y.p));
  record("cublas_tf32", tg, extra);
  CB(cublasSetMathMode(blas(), CUBLAS_DEFAULT_MATH));
  const double cp = median_ms([&] { CK(cudaMemcpyAsync(d.split.p, d.y.p, sizeof(float) * B * N, cudaMemcpyDeviceToDevice)); });
  record("copy_logits", cp);
  record("split_weight", median_ms([&] { sc::split_weight_tf32x3(d.w.p, K, N, K, d.split.p, 2 * K, nullptr); }));

  // the GEMM of the layers (bias in the epilogue), per precision; tf32x3 slice sweep
  for (sc::GemmPrecision prec : {sc::GemmPrecision::fp32, sc::GemmPrecision::tf32}) {
    const sc::LinearOperands o = d.ops(p, prec);
    const double t = median_ms([&] { softfuse::cuda_specialized::impl::linear_gemm(o, nullptr); });
    std::snprintf(extra, sizeof extra, "\"logits_err\":%.3e", logits_error(p, d.y.p));
    record(std::string("lt_gemm_") + name(prec), t, extra);
  }
  for (std::int64_t slice : {256, 512, 1024, 1216, 2048, 4096, 8192}) {  // the longest slice; 1216: the library's
    const sc::LinearOperands o = d.ops(p, sc::GemmPrecision::tf32x3);
    const double t = median_ms([&] { softfuse::cuda_specialized::impl::linear_gemm(o, nullptr, slice); });
    std::snprintf(extra, sizeof extra, "\"logits_err\":%.3e,\"max_slice\":%ld,\"slices\":%ld", logits_error(p, d.y.p),
                  long(slice), long((K + slice - 1) / slice));
    record("lt_gemm_tf32x3_slice" + std::to_string(slice), t, extra);
  }
  // the layers
  for (sc::GemmPrecision prec : {sc::GemmPrecision::fp32, sc::GemmPrecision::tf32, sc::GemmPrecision::tf32x3})
    layers_vs_cublas(p, d, prec, prec == sc::GemmPrecision::tf32 ? tg : sg);
  // the tf32x3 GEMM alone again, right after the layers, and a layer timed over back-to-back calls
  {
    const sc::LinearOperands o = d.ops(p, sc::GemmPrecision::tf32x3);
    record("lt_gemm_tf32x3_again", median_ms([&] { softfuse::cuda_specialized::impl::linear_gemm(o, nullptr); }));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int rep = 0; rep < 2; ++rep) {
      CK(cudaEventRecord(e0));
      for (int i = 0; i < iters; ++i) d.run(p, Layer::gelu_exact, sc::GemmPrecision::tf32x3);
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      record("gelu_exact_tf32x3_back_to_back", ms / iters);
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
  }
  d.reset_stats(p);
}

// ------------------------------------------------------------------------------------------
// exploration: cuBLASLt features that could take work off the layers

struct LtGemm {  // yᵀ[m, n] (pitch ldc) = alpha · A[k, m]ᵀ · B[k, n] + beta yᵀ (+ bias), TF32, column major
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  LtGemm(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t lda, std::int64_t ldb, std::int64_t ldc,
         const float* bias, const float* alpha_vector) {
    CB(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (bias) {
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
      CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    if (alpha_vector) {
      const cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO;
      CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm));
    }
    CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, k, m, lda));
    CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, ldb));
    CB(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, ldc));
  }
  ~LtGemm() {
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
  }
  std::vector<cublasLtMatmulHeuristicResult_t> candidates(cublasLtHandle_t lt, std::size_t room) const {
    cublasLtMatmulPreference_t pref;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &room, sizeof room));
    std::vector<cublasLtMatmulHeuristicResult_t> r(16);
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 16, r.data(), &found);
    cublasLtMatmulPreferenceDestroy(pref);
    r.resize(st == CUBLAS_STATUS_SUCCESS ? found : 0);
    return r;
  }
  cublasStatus_t run(cublasLtHandle_t lt, const cublasLtMatmulAlgo_t& algo, const void* alpha, const float* a,
                     const float* b, float beta, float* c, void* work, std::size_t ws) const {
    return cublasLtMatmul(lt, desc, alpha, a, la, b, lb, &beta, c, lc, c, lc, &algo, work, ws, nullptr);
  }
};

static int algo_config(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr) {
  std::int64_t v = 0;  // attributes are 16 or 32 bits; little endian
  std::size_t w = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, attr == CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID ||
                                                          attr == CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID ? 2 : 4, &w);
  return int(v);
}

static void explore() {
  const std::int64_t B = 1024, K = 8192, N = 8192;
  std::printf("building the fp64 reference logits...\n");
  const Problem p = make_problem(B, K, N, N, false);
  DevProblem d(p);
  cublasLtHandle_t lt;
  CB(cublasLtCreate(&lt));
  const std::size_t room = std::size_t(64) << 20;
  Dev<char> work(room);
  // x split [hi | lo] (the weight's split in d.split is [lo | hi])
  Dev<float> xs(2 * B * K), tmp(2 * B * K);
  sc::split_weight_tf32x3(d.x.p, K, B, K, tmp.p, 2 * K, nullptr);
  CK(cudaMemcpy2D(xs.p, 8 * K, tmp.p + K, 8 * K, 4 * K, B, cudaMemcpyDeviceToDevice));
  CK(cudaMemcpy2D(xs.p + K, 8 * K, tmp.p, 8 * K, 4 * K, B, cudaMemcpyDeviceToDevice));
  const float one = 1;
  char extra[256];

  // the cross products over the concatenated K (with the bias), as the library runs them
  const LtGemm cross(N, B, 2 * K, 2 * K, 2 * K, N, d.b.p, nullptr);
  auto cc = cross.candidates(lt, room);
  cublasLtMatmulAlgo_t cross_algo{};
  for (auto& r : cc)
    if (r.workspaceSize == 0) {
      cross_algo = r.algo;
      break;
    }
  record("explore_cross_products", median_ms([&] { CB(cross.run(lt, cross_algo, &one, d.split.p, xs.p, 0.f, d.y.p, nullptr, 0)); }));

  // the high x high product as one GEMM with split K: each split accumulates K / splits in the
  // tensor cores, cuBLASLt reduces the splits in fp32
  const LtGemm high(N, B, K, 2 * K, 2 * K, N, nullptr, nullptr);
  auto hc = high.candidates(lt, room);
  for (std::size_t rank = 0; rank < hc.size(); ++rank) {
    const cublasLtMatmulAlgo_t base = hc[rank].algo;
    int splitk_cap = 0;
    std::uint32_t schemes = 0;
    std::size_t w = 0;
    cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &splitk_cap, sizeof splitk_cap, &w);
    cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes, &w);
    std::printf("high x high rank %zu: algo %d tile %d stages %d splitk %d (cap %d, schemes %u) swizzle %d custom %d "
                "cluster %d ws %zu\n", rank, algo_config(base, CUBLASLT_ALGO_CONFIG_ID),
                algo_config(base, CUBLASLT_ALGO_CONFIG_TILE_ID), algo_config(base, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                algo_config(base, CUBLASLT_ALGO_CONFIG_SPLITK_NUM), splitk_cap, schemes,
                algo_config(base, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING), algo_config(base, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
                algo_config(base, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID), hc[rank].workspaceSize);
    for (int splits : {1, 4, 8, 16}) {
      for (std::uint32_t scheme : {CUBLASLT_REDUCTION_SCHEME_NONE, CUBLASLT_REDUCTION_SCHEME_INPLACE,
                                   CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE, CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE}) {
        if ((splits == 1) != (scheme == CUBLASLT_REDUCTION_SCHEME_NONE)) continue;
        cublasLtMatmulAlgo_t a = base;
        if (cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof splits) ||
            cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme))
          continue;
        cublasLtMatmulHeuristicResult_t chk{};
        if (cublasLtMatmulAlgoCheck(lt, high.desc, high.la, high.lb, high.lc, high.lc, &a, &chk) != CUBLAS_STATUS_SUCCESS ||
            chk.workspaceSize > room)
          continue;
        bool ok = true;
        const double t = median_ms([&] {
          ok = ok && high.run(lt, a, &one, d.split.p + K, xs.p, 1.f, d.y.p, work.p, chk.workspaceSize) == CUBLAS_STATUS_SUCCESS;
        });
        if (!ok) continue;
        CB(cross.run(lt, cross_algo, &one, d.split.p, xs.p, 0.f, d.y.p, nullptr, 0));
        CB(high.run(lt, a, &one, d.split.p + K, xs.p, 1.f, d.y.p, work.p, chk.workspaceSize));
        CK(cudaDeviceSynchronize());
        std::snprintf(extra, sizeof extra,
                      "\"rank\":%zu,\"algo\":%d,\"tile\":%d,\"splits\":%d,\"scheme\":%u,\"workspace\":%zu,\"logits_err\":%.3e",
                      rank, algo_config(a, CUBLASLT_ALGO_CONFIG_ID), algo_config(a, CUBLASLT_ALGO_CONFIG_TILE_ID), splits,
                      scheme, chk.workspaceSize, logits_error(p, d.y.p));
        record("explore_high_splitk", t, extra);
      }
    }
  }

  // BatchNorm inference folded into the epilogue: yᵀ = mul ⊙ (W x) + shift (alpha vector, bias)
  Dev<float> mul(N), shift(N);
  std::vector<float> hm(N), hs(N);
  for (std::int64_t j = 0; j < N; ++j) hm[j] = float(0.5 + uniform()), hs[j] = float(uniform() - 0.5);
  mul.put(hm);
  shift.put(hs);
  const LtGemm folded(N, B, K, K, K, N, shift.p, mul.p);
  auto fc = folded.candidates(lt, room);
  std::printf("alpha-vector epilogue: %zu candidates\n", fc.size());
  for (std::size_t rank = 0; rank < fc.size() && rank < 8; ++rank) {
    bool ok = true;
    const double t = median_ms([&] {
      ok = ok && folded.run(lt, fc[rank].algo, mul.p, d.w.p, d.x.p, 0.f, d.y.p, work.p, fc[rank].workspaceSize) ==
                     CUBLAS_STATUS_SUCCESS;
    });
    if (!ok) continue;
    CK(cudaDeviceSynchronize());
    const std::vector<float> y = d.y.get();
    double num = 0, den = 0;
    for (std::int64_t i = 0; i < B; ++i)
      for (std::int64_t j = 0; j < N; ++j) {
        const double ref = double(hm[j]) * (p.z64[i * N + j] - p.b[j]) + hs[j];
        num += (y[i * N + j] - ref) * (y[i * N + j] - ref);
        den += ref * ref;
      }
    std::snprintf(extra, sizeof extra, "\"rank\":%zu,\"workspace\":%zu,\"err\":%.3e", rank, fc[rank].workspaceSize,
                  std::sqrt(num / den));
    record("explore_alpha_vector_bias", t, extra);
  }
  cublasLtDestroy(lt);
}

// The TF32 GEMM of the BatchNorm-training layer (no bias): cuBLASLt configurations around the
// heuristic's candidates (each candidate's tile x stages, then swizzle, custom option and cluster
// shape of the six fastest), the four fastest timed interleaved with cuBLAS alone and the
// heuristic's first. Configurations needing more than 32 MiB of workspace are skipped.
static void tune() {
  const std::int64_t B = 1024, K = 8192, N = 8192;
  const Problem p = make_problem(B, K, N, N, false);
  DevProblem d(p);
  cublasLtHandle_t lt;
  CB(cublasLtCreate(&lt));
  const LtGemm g(N, B, K, K, K, N, nullptr, nullptr);
  const float one = 1;
  const std::size_t room = std::size_t(32) << 20;
  Dev<float> work(room / sizeof(float));
  const auto heur = g.candidates(lt, room);
  struct Cand {
    cublasLtMatmulAlgo_t a;
    std::size_t ws;
    double ms;
  };
  const auto describe = [](const cublasLtMatmulAlgo_t& a, std::size_t ws) {
    char buf[192];
    std::snprintf(buf, sizeof buf,
                  "\"algo\":%d,\"tile\":%d,\"stages\":%d,\"swizzle\":%d,\"custom\":%d,\"cluster\":%d,\"workspace\":%zu",
                  algo_config(a, CUBLASLT_ALGO_CONFIG_ID), algo_config(a, CUBLASLT_ALGO_CONFIG_TILE_ID),
                  algo_config(a, CUBLASLT_ALGO_CONFIG_STAGES_ID), algo_config(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                  algo_config(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION), algo_config(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID), ws);
    return std::string(buf);
  };
  const auto run = [&](const Cand& c) { return g.run(lt, c.a, &one, d.w.p, d.x.p, 0.f, d.y.p, work.p, c.ws); };
  std::vector<Cand> all;
  const auto try_algo = [&](const cublasLtMatmulAlgo_t& a) {
    cublasLtMatmulHeuristicResult_t chk{};
    if (cublasLtMatmulAlgoCheck(lt, g.desc, g.la, g.lb, g.lc, g.lc, &a, &chk) != CUBLAS_STATUS_SUCCESS ||
        chk.workspaceSize > room)
      return;
    Cand c{a, chk.workspaceSize, 0};
    bool ok = true;
    c.ms = median_ms([&] { ok = ok && run(c) == CUBLAS_STATUS_SUCCESS; });
    if (ok) all.push_back(c);
  };
  const auto caps = [](const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoCapAttributes_t attr, int fallback) {
    std::size_t w = 0;
    cublasLtMatmulAlgoCapGetAttribute(&a, attr, nullptr, 0, &w);
    std::vector<std::uint32_t> v(w / 4);
    if (w) cublasLtMatmulAlgoCapGetAttribute(&a, attr, v.data(), w, &w);
    if (v.empty()) v.push_back(std::uint32_t(fallback));
    return v;
  };
  for (const auto& h : heur) {
    for (std::uint32_t tile : caps(h.algo, CUBLASLT_ALGO_CAP_TILE_IDS, algo_config(h.algo, CUBLASLT_ALGO_CONFIG_TILE_ID)))
      for (std::uint32_t st : caps(h.algo, CUBLASLT_ALGO_CAP_STAGES_IDS, algo_config(h.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID))) {
        cublasLtMatmulAlgo_t a = h.algo;
        cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile);
        cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &st, sizeof st);
        try_algo(a);
      }
  }
  const auto by_time = [](const Cand& x, const Cand& y) { return x.ms < y.ms; };
  std::sort(all.begin(), all.end(), by_time);
  const std::vector<Cand> seeds(all.begin(), all.begin() + std::min<std::ptrdiff_t>(6, all.size()));
  for (const Cand& c : seeds) {
    int custom_max = 0;
    std::size_t w = 0;
    cublasLtMatmulAlgoCapGetAttribute(&c.a, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX, &custom_max, sizeof custom_max, &w);
    for (std::uint32_t swz : {0u, 1u})
      for (std::uint32_t cu = 0; cu <= std::uint32_t(std::min(custom_max, 7)); ++cu)
        for (int shape : {CUBLASLT_CLUSTER_SHAPE_AUTO, CUBLASLT_CLUSTER_SHAPE_1x1x1, CUBLASLT_CLUSTER_SHAPE_2x1x1,
                          CUBLASLT_CLUSTER_SHAPE_1x2x1, CUBLASLT_CLUSTER_SHAPE_2x2x1, CUBLASLT_CLUSTER_SHAPE_4x1x1,
                          CUBLASLT_CLUSTER_SHAPE_1x4x1}) {
          const std::uint16_t cl = std::uint16_t(shape);
          cublasLtMatmulAlgo_t a = c.a;
          cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof swz);
          cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &cu, sizeof cu);
          cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, sizeof cl);
          try_algo(a);
        }
  }
  std::sort(all.begin(), all.end(), by_time);
  std::printf("tune: %zu heuristic candidates, %zu configurations timed\n", heur.size(), all.size());
  for (std::size_t i = 0; i < all.size() && i < 8; ++i) record("tune_config_" + std::to_string(i), all[i].ms, describe(all[i].a, all[i].ws));
  if (heur.empty() || all.empty()) {
    cublasLtDestroy(lt);
    return;
  }
  std::vector<Cand> timed{Cand{heur[0].algo, heur[0].workspaceSize, 0}};
  for (std::size_t i = 0; i < all.size() && i < 4; ++i) timed.push_back(all[i]);
  std::vector<std::function<void()>> fs{[&] { cublas_alone(p, d, true); }};
  for (const Cand& c : timed) fs.push_back([&, c] { CB(run(c)); });
  for (int round = 0; round < 3; ++round) {
    const std::vector<double> t = interleaved_medians(fs);
    record("tune_cublas_tf32", t[0]);
    for (std::size_t k = 0; k < timed.size(); ++k) {
      char ratio[48];
      std::snprintf(ratio, sizeof ratio, ",\"vs_cublas_alone\":%.4f", t[k + 1] / t[0]);
      record(k == 0 ? "tune_heuristic_first" : "tune_top_" + std::to_string(k - 1), t[k + 1],
             describe(timed[k].a, timed[k].ws) + ratio);
    }
  }
  CB(cublasSetMathMode(blas(), CUBLAS_DEFAULT_MATH));
  cublasLtDestroy(lt);
}

// Medians of several calls timed interleaved, call by call (each between its own events), so
// that every median sees the same clocks and temperature: the GPU's clocks drift over a run.
static std::vector<double> interleaved_medians(const std::vector<std::function<void()>>& fs) {
  const std::size_t n = fs.size();
  for (int i = 0; i < 3; ++i)
    for (auto& f : fs) f();
  CK(cudaDeviceSynchronize());
  std::vector<cudaEvent_t> ev(2 * n * iters);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  for (int i = 0; i < iters; ++i)
    for (std::size_t k = 0; k < n; ++k) {
      CK(cudaEventRecord(ev[2 * (i * n + k)]));
      fs[k]();
      CK(cudaEventRecord(ev[2 * (i * n + k) + 1]));
    }
  CK(cudaDeviceSynchronize());
  std::vector<double> med(n);
  for (std::size_t k = 0; k < n; ++k) {
    std::vector<float> t(iters);
    for (int i = 0; i < iters; ++i) CK(cudaEventElapsedTime(&t[i], ev[2 * (i * n + k)], ev[2 * (i * n + k) + 1]));
    std::sort(t.begin(), t.end());
    med[k] = t[iters / 2];
  }
  for (auto& e : ev) CK(cudaEventDestroy(e));
  return med;
}

// One precision's three layers timed call by call interleaved with the matching cuBLAS GEMM alone
// (SGEMM for fp32 and tf32x3, TF32 for tf32), so that the ratios compare calls made at the same
// clocks; early_ms > 0 adds the ratio against that GEMM-alone time measured earlier in the run.
static void layers_vs_cublas(const Problem& p, DevProblem& d, sc::GemmPrecision prec, double early_ms) {
  const bool tc = prec == sc::GemmPrecision::tf32;
  const std::vector<Layer> layers{Layer::gelu_exact, Layer::bn_train, Layer::bn_infer};
  std::vector<std::function<void()>> fs{[&] { cublas_alone(p, d, tc); }};
  for (Layer l : layers) fs.push_back([&, l] { d.run(p, l, prec); });
  const std::vector<double> t = interleaved_medians(fs);
  CB(cublasSetMathMode(blas(), CUBLAS_DEFAULT_MATH));
  record(std::string(tc ? "cublas_tf32" : "cublas_sgemm") + "_interleaved_" + name(prec), t[0]);
  char extra[96];
  for (std::size_t k = 0; k < layers.size(); ++k) {
    int n = std::snprintf(extra, sizeof extra, "\"vs_cublas_alone\":%.4f", t[k + 1] / t[0]);
    if (early_ms > 0) std::snprintf(extra + n, sizeof extra - n, ",\"vs_cublas_alone_early\":%.4f", t[k + 1] / early_ms);
    record(std::string(name(layers[k])) + "_" + name(prec), t[k + 1], extra);
  }
}

// The tf32 target in brief: cuBLAS TF32 alone and the three layers, interleaved, in `rounds`
// rounds. cool_s > 0: the device idles that long before each round, so that every round runs at
// full clocks (without it, the H100 lowers its clocks within a second of this load and the later
// rounds compare at lower ones).
static void quick(int rounds, int cool_s) {
  const Problem p = make_problem(1024, 8192, 8192, 8192, false);
  DevProblem d(p);
  for (int round = 0; round < rounds; ++round) {
    if (cool_s > 0) {
      CK(cudaDeviceSynchronize());
      std::this_thread::sleep_for(std::chrono::seconds(cool_s));
    }
    layers_vs_cublas(p, d, sc::GemmPrecision::tf32, 0);
  }
  d.reset_stats(p);
}

// Prototype: the tf32 BatchNorm-training GEMM cut into two halves of the features, so that the
// first half's statistics run beside the second half's GEMM (the halves in sequence, or
// concurrently on two streams).
static void split_proto() {
  const std::int64_t B = 1024, K = 8192, N = 8192, H = N / 2;
  const Problem p = make_problem(B, K, N, N, false);
  DevProblem d(p);
  namespace si = softfuse::cuda_specialized::impl;
  sc::LinearOperands full = d.ops(p, sc::GemmPrecision::tf32);
  full.bias = nullptr;
  sc::LinearOperands h1 = full, h2 = full;
  h1.out = H;
  h2.out = H;
  h2.weight += H * K;
  h2.y += H;
  const auto bn_of = [&](std::int64_t j0, float* ws) {
    return sc::BatchNormOperands{d.gamma.p + j0, d.beta.p + j0, d.rmean.p + j0, d.rvar.p + j0, d.scale.p,
                                 std::int64_t(d.scale.n), true, 1e-5, 0.1, ws};
  };
  Dev<float> ws1(2 * H), ws2(2 * H), wsf(2 * N);
  sc::LinearOperands b1 = h1, b2 = h2;  // bias pointers for the statistics' running mean
  b1.bias = d.b.p;
  b2.bias = d.b.p + H;
  sc::LinearOperands bf = full;
  bf.bias = d.b.p;
  int lo = 0, hi = 0;
  CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  cudaStream_t main_s, side_hi, side_lo;
  CK(cudaStreamCreateWithFlags(&main_s, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithPriority(&side_hi, cudaStreamNonBlocking, hi));
  CK(cudaStreamCreateWithPriority(&side_lo, cudaStreamNonBlocking, lo));
  cudaEvent_t e1, e2;
  CK(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming));
  std::printf("stream priorities: least %d greatest %d\n", lo, hi);
  CB(cublasSetStream(blas(), main_s));
  // timed on main_s: the events of interleaved_medians are on the legacy stream, so sync around
  const auto on_main = [&](const std::function<void()>& f) {
    return [&, f] {
      CK(cudaEventRecord(e1, nullptr));
      CK(cudaStreamWaitEvent(main_s, e1, 0));
      f();
      CK(cudaEventRecord(e2, main_s));
      CK(cudaStreamWaitEvent(nullptr, e2, 0));
    };
  };
  cudaEvent_t f0, f1, f2, f3;
  CK(cudaEventCreateWithFlags(&f0, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&f1, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&f2, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&f3, cudaEventDisableTiming));
  cudaStream_t side_n, side_n2;
  CK(cudaStreamCreateWithFlags(&side_n, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&side_n2, cudaStreamNonBlocking));
  // The halves concurrently, the first GEMM on s1 beside the second on the main stream; with
  // stats, the first half's statistics on s2, also beside the second GEMM.
  const auto concurrent = [&](cudaStream_t s1, cudaStream_t s2, bool stats) {
    CK(cudaEventRecord(f0, main_s));
    CK(cudaStreamWaitEvent(s1, f0, 0));
    si::linear_gemm(h1, s1);
    CK(cudaEventRecord(f1, s1));
    cudaEvent_t first_done = f1;
    if (stats) {
      CK(cudaStreamWaitEvent(s2, f1, 0));
      si::batchnorm_affine(0, b1, bn_of(0, ws1.p), ws1.p, s2);
      CK(cudaEventRecord(f3, s2));
      first_done = f3;
    }
    si::linear_gemm(h2, main_s);
    if (stats) si::batchnorm_affine(0, b2, bn_of(H, ws2.p), ws2.p, main_s);
    CK(cudaStreamWaitEvent(main_s, first_done, 0));
  };
  const std::vector<std::function<void()>> fs{
      on_main([&] { cublas_alone(p, d, true); }),
      on_main([&] { si::linear_gemm(full, main_s); }),
      on_main([&] {
        si::linear_gemm(full, main_s);
        si::batchnorm_affine(0, bf, bn_of(0, wsf.p), wsf.p, main_s);
      }),
      on_main([&] {
        si::linear_gemm(h1, main_s);
        si::linear_gemm(h2, main_s);
      }),
      on_main([&] {
        si::linear_gemm(h1, main_s);
        si::linear_gemm(h2, main_s);
        si::batchnorm_affine(0, b1, bn_of(0, ws1.p), ws1.p, main_s);
        si::batchnorm_affine(0, b2, bn_of(H, ws2.p), ws2.p, main_s);
      }),
      on_main([&] {  // second GEMM on a high-priority stream, first statistics beside it
        si::linear_gemm(h1, main_s);
        CK(cudaEventRecord(f1, main_s));
        CK(cudaStreamWaitEvent(side_hi, f1, 0));
        si::linear_gemm(h2, side_hi);
        CK(cudaEventRecord(f2, side_hi));
        si::batchnorm_affine(0, b1, bn_of(0, ws1.p), ws1.p, main_s);
        CK(cudaStreamWaitEvent(main_s, f2, 0));
        si::batchnorm_affine(0, b2, bn_of(H, ws2.p), ws2.p, main_s);
      }),
      on_main([&] {  // first statistics on a low-priority side stream
        si::linear_gemm(h1, main_s);
        CK(cudaEventRecord(f1, main_s));
        CK(cudaStreamWaitEvent(side_lo, f1, 0));
        si::linear_gemm(h2, main_s);
        si::batchnorm_affine(0, b1, bn_of(0, ws1.p), ws1.p, side_lo);
        CK(cudaEventRecord(f2, side_lo));
        si::batchnorm_affine(0, b2, bn_of(H, ws2.p), ws2.p, main_s);
        CK(cudaStreamWaitEvent(main_s, f2, 0));
      }),
      on_main([&] { concurrent(side_hi, side_lo, false); }),  // the first half on the high-priority stream
      on_main([&] { concurrent(side_hi, side_lo, true); }),
      on_main([&] { concurrent(side_n, side_n2, true); }),
  };
  const char* names[] = {"proto_cublas_tf32", "proto_gemm_full", "proto_gemm_full_stats", "proto_gemm_halves",
                         "proto_gemm_halves_stats_serial", "proto_split_gemm2_high_priority",
                         "proto_split_stats1_side", "proto_concurrent_halves",
                         "proto_concurrent_stats1_low_priority", "proto_concurrent_normal_priority"};
  for (int round = 0; round < 3; ++round) {
    const std::vector<double> t = interleaved_medians(fs);
    for (std::size_t k = 0; k < t.size(); ++k) {
      char extra[64];
      std::snprintf(extra, sizeof extra, "\"vs_cublas_alone\":%.4f", t[k] / t[0]);
      record(names[k], t[k], extra);
    }
  }
  CB(cublasSetStream(blas(), nullptr));
  CB(cublasSetMathMode(blas(), CUBLAS_DEFAULT_MATH));
  CK(cudaDeviceSynchronize());
  for (cudaEvent_t e : {e1, e2, f0, f1, f2, f3}) CK(cudaEventDestroy(e));
  for (cudaStream_t st : {main_s, side_hi, side_lo, side_n, side_n2}) CK(cudaStreamDestroy(st));
  d.reset_stats(p);
}

// Each layer once per GEMM precision after a warm-up, for a kernel-level profile (ncu).
static void profile() {
  const std::int64_t B = 1024, K = 8192, N = 8192;
  const Problem p = make_problem(B, K, N, N, false);
  DevProblem d(p);
  for (sc::GemmPrecision prec : {sc::GemmPrecision::tf32, sc::GemmPrecision::tf32x3})
    for (Layer l : {Layer::gelu_exact, Layer::bn_train, Layer::bn_infer})
      for (int rep = 0; rep < 2; ++rep) {
        d.run(p, l, prec);
        CK(cudaDeviceSynchronize());
      }
}

int main(int argc, char** argv) {
  bool do_check = false, do_small = false, do_bench = false, do_explore = false, do_profile = false, do_quick = false, do_split = false, do_tune = false;
  const char* json = nullptr;
  int quick_rounds = 3, quick_cool = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--check")) do_check = true;
    else if (!std::strcmp(argv[i], "--check-sanitize")) do_small = true;
    else if (!std::strcmp(argv[i], "--bench")) do_bench = true;
    else if (!std::strcmp(argv[i], "--explore")) do_explore = true;
    else if (!std::strcmp(argv[i], "--profile")) do_profile = true;
    else if (!std::strcmp(argv[i], "--quick")) do_quick = true;
    else if (!std::strcmp(argv[i], "--split-proto")) do_split = true;
    else if (!std::strcmp(argv[i], "--tune")) do_tune = true;
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::max(5, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) quick_rounds = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--cool") && i + 1 < argc) quick_cool = std::max(0, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--check] [--check-sanitize] [--bench] [--explore] [--tune] [--quick] [--split-proto] [--profile] [--json PATH] [--iters N] [--rounds N] [--cool S]\n", argv[0]);
      return 2;
    }
  }
  if (!do_check && !do_small && !do_bench && !do_explore && !do_profile && !do_quick && !do_split && !do_tune) do_check = do_bench = true;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, linear_max_out %ld\n", prop.name, long(sc::linear_max_out(0)));
  try {
    if (do_check || do_small) checks(!do_check);
    if (do_bench) bench();
    if (do_explore) explore();
    if (do_quick) quick(quick_rounds, quick_cool);
    if (do_split) split_proto();
    if (do_tune) tune();
    if (do_profile) profile();
  } catch (const std::exception& e) {
    std::printf("EXCEPTION %s\n", e.what());
    return 3;
  }
  std::printf("checks: %d failed\n", failures);
  if (json) {
    FILE* f = std::fopen(json, "w");
    std::time_t now = std::time(nullptr);
    char date[64];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    std::fprintf(f, "{\"date\":\"%s\",\"device\":\"%s\",\"iters\":%d,\"checks\":[\n%s],\n\"bench\":[\n%s]}\n", date,
                 prop.name, iters, json_checks.c_str(), json_bench.c_str());
    std::fclose(f);
  }
  return failures ? 1 : 0;
}
