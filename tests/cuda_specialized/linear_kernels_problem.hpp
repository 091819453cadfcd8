#ifndef SOFTFUSE_TESTS_LINEAR_KERNELS_PROBLEM_HPP
#define SOFTFUSE_TESTS_LINEAR_KERNELS_PROBLEM_HPP

// The problems of the CUDA fused layers (cuda_specialized/linear.hpp) shared by test_linear_kernels.cu and
// perf/cuda_specialized/linear_kernels_bench.cu: random operands on the host, their fp64 logits (cuBLAS DGEMM),
// device copies, and a call of each layer.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "softfuse/cuda_specialized/linear.hpp"

namespace sc = softfuse::cuda_specialized;

#define CB(call)                                                           \
  do {                                                                     \
    if ((call) != CUBLAS_STATUS_SUCCESS) {                                 \
      std::fprintf(stderr, "cuBLAS error at %s:%d\n", __FILE__, __LINE__); \
      std::exit(2);                                                        \
    }                                                                      \
  } while (0)

inline std::uint64_t rng_state = 0x9e3779b97f4a7c15ull;
inline double uniform() {  // [0, 1)
  std::uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z               = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z               = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return double((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

template <class T>
struct Dev {
  T* p          = nullptr;
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

inline cublasHandle_t blas() {
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

inline Problem make_problem(std::int64_t batch, std::int64_t in, std::int64_t out, std::int64_t ldy, bool vector_scale,
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
    p.beta[j]  = float(uniform() - 0.5);
    p.rmean[j] = float(bias_offset + 0.2 * (uniform() - 0.5));
    p.rvar[j]  = float(0.5 + uniform());
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
inline const char* name(Layer l) {
  return l == Layer::gelu_exact  ? "gelu_exact"
         : l == Layer::gelu_tanh ? "gelu_tanh"
         : l == Layer::bn_train  ? "bn_train"
                                 : "bn_infer";
}
inline const char* name(sc::GemmPrecision p) {
  return p == sc::GemmPrecision::fp32 ? "fp32" : p == sc::GemmPrecision::tf32 ? "tf32" : "tf32x3";
}
// Device copies of a problem's operands (y with pitch ldy, offset by `shift` floats to test
// misaligned rows).
struct DevProblem {
  Dev<float> x, w, b, gamma, beta, rmean, rvar, scale, y, split, ws;
  std::int64_t shift;
  DevProblem(const Problem& p, std::int64_t shift_ = 0)
      : x(p.x.size()),
        w(p.w.size()),
        b(p.b.size()),
        gamma(p.out),
        beta(p.out),
        rmean(p.out),
        rvar(p.out),
        scale(p.scale.size()),
        y(p.batch * p.ldy + shift_),
        split(2 * p.w.size()),
        ws(3 * p.out),
        shift(shift_) {
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
    return {x.p,     p.in, w.p, p.in, b.p, y.p + shift, p.ldy, p.batch, p.in, p.out, prec, presplit ? split.p : nullptr,
            2 * p.in};
  }
  void run(const Problem& p, Layer l, sc::GemmPrecision prec, cudaStream_t s = nullptr, bool presplit = true) {
    const sc::LinearOperands o = ops(p, prec, presplit);
    if (l == Layer::gelu_exact || l == Layer::gelu_tanh) {
      sc::linear_gelu_softmax(o, l == Layer::gelu_exact, s);
    } else {
      const sc::BatchNormOperands bn{gamma.p,
                                     beta.p,
                                     rmean.p,
                                     rvar.p,
                                     scale.p,
                                     std::int64_t(scale.n),
                                     l == Layer::bn_train,
                                     1e-5,
                                     0.1,
                                     presplit ? ws.p : nullptr};
      sc::linear_batchnorm_softmax(o, bn, s);
    }
  }
};

#endif
