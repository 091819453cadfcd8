// Benchmark of softfuse's CUDA fused layers (cuda_specialized/linear.hpp): Linear -> GELU -> softmax and
// Linear -> BatchNorm1d -> scale -> softmax in the three GEMM precisions, against cuBLAS alone (the
// correctness checks: tests/cuda_specialized/test_linear_kernels.cu). Built by CMake as the target
// linear_kernels_bench.
//
//   --bench           (default) the 1024 x 8192 x 8192 workload: GEMMs alone, tf32x3 slice sweep, the
//                     layers timed interleaved with the matching cuBLAS GEMM alone
//   --quick           the tf32 layers and the TF32 GEMM alone timed call by call interleaved, three
//                     rounds (A/B tests of the row work); --rounds N rounds, --cool S seconds idle
//                     before each round (every round at full clocks)
//   --fp32-full-clocks the fp32 GEMM configurations (cuBLAS, cuBLASLt's candidates, the library's) and the
//                     fp32 layers, each block of --iters calls after --cool S seconds idle, --rounds N rounds
//   --tc-full-clocks  the same for cuBLAS TF32 alone and the library's TF32 and 3xTF32 GEMMs and layers
//   --profile         one call per layer and GEMM precision on the workload, for
//                     `ncu --clock-control none --metrics gpu__time_duration.sum --csv ... --profile`
//   --prefer-shared   first set the device-wide cache preference to shared memory, as Kokkos' CUDA
//                     initialization does, so that kernels without their own preference (cuBLAS's) run as
//                     they do under Kokkos
//   --json PATH       results as JSON;  --iters N  timed repetitions (default 20)
// Exit status non-zero when a CUDA or cuBLAS call fails.
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
#include "linear_kernels_problem.hpp"
#include "softfuse/cuda_specialized/linear.hpp"
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
  json_bench += (json_bench.empty() ? "" : ",\n") + std::string("{\"name\":\"") + name +
                "\",\"ms\":" + std::to_string(ms) + (extra.empty() ? "" : "," + extra) + "}";
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

// The bench's GEMM as cuBLASLt sees it: yᵀ[out, batch] = Wᵀ·xᵀ over k (row pitch in), with the bias
// epilogue when `bias` is given; a handle, the descriptor and the layouts, destroyed with it.
struct LtGemm {
  cublasLtHandle_t lt       = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  LtGemm(const Problem& p, cublasComputeType_t compute, std::int64_t k, const float* bias) {
    CB(cublasLtCreate(&lt));
    CB(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (bias) {
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
      CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, k, p.out, p.in));
    CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, p.batch, p.in));
    CB(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, p.out, p.batch, p.ldy));
  }
  LtGemm(const LtGemm&)            = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  ~LtGemm() {
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(lt);
  }
  // The heuristic's candidates (at most 8) under a workspace limit of `room` bytes.
  int candidates(std::size_t room, cublasLtMatmulHeuristicResult_t (&res)[8]) const {
    cublasLtMatmulPreference_t pref;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &room, sizeof room));
    int found = 0;
    CB(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 8, res, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    return found;
  }
  // d.y = beta d.y + W x (+ bias) with `algo` and `ws` bytes of workspace at `work`.
  void run(const DevProblem& d, const cublasLtMatmulAlgo_t& algo, float beta, void* work, std::size_t ws) const {
    const float one = 1;
    CB(cublasLtMatmul(lt, desc, &one, d.w.p, la, d.x.p, lb, &beta, d.y.p, lc, d.y.p, lc, &algo, ws ? work : nullptr, ws,
                      nullptr));
  }
};

// cuBLASLt's heuristic candidates for yᵀ = Wᵀ·xᵀ (m = out, n = batch), each timed: with no
// workspace (what the library runs) and with a 32 MiB one.
static void lt_sweep(const Problem& p, DevProblem& d, cublasComputeType_t compute, std::int64_t k, bool beta_one,
                     const char* label) {
  const LtGemm g(p, compute, k, nullptr);
  Dev<char> work(32 << 20);
  for (std::size_t ws : {std::size_t(0), std::size_t(32) << 20}) {
    cublasLtMatmulHeuristicResult_t res[8];
    const int found = g.candidates(ws, res);
    for (int i = 0; i < found; ++i) {
      const double t = median_ms([&] { g.run(d, res[i].algo, beta_one ? 1.f : 0.f, work.p, ws); });
      char extra[160];
      std::snprintf(extra, sizeof extra, "\"workspace_limit\":%zu,\"workspace\":%zu,\"rank\":%d,\"k\":%ld", ws,
                    res[i].workspaceSize, i, long(k));
      record(std::string("lt_sweep_") + label + "_ws" + std::to_string(ws >> 20) + "_" + std::to_string(i), t, extra);
    }
  }
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
  const double cp =
      median_ms([&] { CK(cudaMemcpyAsync(d.split.p, d.y.p, sizeof(float) * B * N, cudaMemcpyDeviceToDevice)); });
  record("copy_logits", cp);
  record("split_weight", median_ms([&] { sc::split_weight_tf32x3(d.w.p, K, N, K, d.split.p, 2 * K, nullptr); }));

  // the GEMM of the layers (bias in the epilogue), per precision; tf32x3 slice sweep
  for (sc::GemmPrecision prec : {sc::GemmPrecision::fp32, sc::GemmPrecision::tf32}) {
    const sc::LinearOperands o = d.ops(p, prec);
    const double t             = median_ms([&] { softfuse::cuda_specialized::impl::linear_gemm(o, nullptr); });
    std::snprintf(extra, sizeof extra, "\"logits_err\":%.3e", logits_error(p, d.y.p));
    record(std::string("lt_gemm_") + name(prec), t, extra);
  }
  for (std::int64_t slice : {256, 512, 1024, 1216, 2048, 4096, 8192}) {  // the longest slice; 1216: the library's
    const sc::LinearOperands o = d.ops(p, sc::GemmPrecision::tf32x3);
    const double t             = median_ms([&] { softfuse::cuda_specialized::impl::linear_gemm(o, nullptr, slice); });
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
    if (early_ms > 0)
      std::snprintf(extra + n, sizeof extra - n, ",\"vs_cublas_alone_early\":%.4f", t[k + 1] / early_ms);
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

// A cuBLASLt algorithm in words: its id, tile, stages, split-K, reduction scheme, CTA swizzle,
// custom option and cluster shape (the enum values of cublasLt.h).
static std::string algo_desc(const cublasLtMatmulAlgo_t& a) {
  auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr) {
    std::uint32_t v = 0;
    std::size_t n   = 0;
    return cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, sizeof v, &n) == CUBLAS_STATUS_SUCCESS ? long(v) : -1L;
  };
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "id=%ld tile=%ld stages=%ld splitk=%ld reduction=%ld swizzle=%ld custom=%ld cluster=%ld",
                get(CUBLASLT_ALGO_CONFIG_ID), get(CUBLASLT_ALGO_CONFIG_TILE_ID), get(CUBLASLT_ALGO_CONFIG_STAGES_ID),
                get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM), get(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING), get(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
                get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
  return buf;
}

// The fp32 GEMM configurations and the fp32 layers at full clocks on the 1024 x 8192 x 8192 workload
// (tensor_cores: cuBLAS TF32 alone, the library's TF32 and 3xTF32 GEMMs and the layers in both instead).
// Each candidate runs as a block of `iters` calls (median) after `cool_s` seconds idle, in `rounds`
// rounds: cublasSgemm in the default and the pedantic math mode (no bias), cuBLASLt's heuristic
// candidates for y = x wᵀ + bias with the bias epilogue (asked with 32 MiB of room, each given the
// workspace it asks for), the library's GEMM, and the three layers. perf/torch_baseline/linear_torch.py
// --full-clocks times the reference framework's side the same way.
static void full_clocks(bool tensor_cores, int rounds, int cool_s) {
  const Problem p = make_problem(1024, 8192, 8192, 8192, false);
  DevProblem d(p);
  const std::int64_t m = p.out, n = p.batch, k = p.in;
  const LtGemm g(p, CUBLAS_COMPUTE_32F, k, d.b.p);
  const std::size_t room = std::size_t(32) << 20;
  Dev<char> work(room);
  cublasLtMatmulHeuristicResult_t res[8];
  const int found = tensor_cores ? 0 : g.candidates(room, res);

  struct Candidate {
    std::string name, algo;
    std::function<void()> run;
    std::vector<double> ms;
  };
  std::vector<Candidate> cs;
  const float one = 1, zero = 0;
  const sc::LinearOperands o = d.ops(p, sc::GemmPrecision::fp32);
  if (tensor_cores) {
    cs.push_back({"cublas_tf32", "", [&] { cublas_alone(p, d, true); }});
    for (sc::GemmPrecision prec : {sc::GemmPrecision::tf32, sc::GemmPrecision::tf32x3}) {
      const sc::LinearOperands op = d.ops(p, prec);
      cs.push_back({std::string("lt_gemm_") + name(prec), "",
                    [&, op] { softfuse::cuda_specialized::impl::linear_gemm(op, nullptr); }});
      for (Layer l : {Layer::gelu_exact, Layer::bn_train, Layer::bn_infer})
        cs.push_back({std::string(name(l)) + "_" + name(prec), "", [&, l, prec] { d.run(p, l, prec); }});
    }
  } else {
    for (cublasMath_t mode : {CUBLAS_DEFAULT_MATH, CUBLAS_PEDANTIC_MATH})
      cs.push_back({mode == CUBLAS_DEFAULT_MATH ? "cublas_sgemm_default" : "cublas_sgemm_pedantic", "", [&, mode] {
                      CB(cublasSetMathMode(blas(), mode));
                      CB(cublasSgemm(blas(), CUBLAS_OP_T, CUBLAS_OP_N, int(m), int(n), int(k), &one, d.w.p, int(k),
                                     d.x.p, int(k), &zero, d.y.p, int(p.ldy)));
                    }});
    for (int i = 0; i < found; ++i) {
      const std::size_t ws = res[i].workspaceSize;
      cs.push_back({"lt_bias_rank" + std::to_string(i), algo_desc(res[i].algo) + " workspace=" + std::to_string(ws),
                    [&, i, ws] { g.run(d, res[i].algo, 0.f, work.p, ws); }});
    }
    cs.push_back({"lt_gemm_fp32", "", [&] { softfuse::cuda_specialized::impl::linear_gemm(o, nullptr); }});
    for (Layer l : {Layer::gelu_exact, Layer::bn_train, Layer::bn_infer})
      cs.push_back({std::string(name(l)) + "_fp32", "", [&, l] { d.run(p, l, sc::GemmPrecision::fp32); }});
  }
  for (auto& c : cs)
    if (!c.algo.empty()) std::printf("candidate %-22s %s\n", c.name.c_str(), c.algo.c_str());
  for (int round = 0; round < rounds; ++round)
    for (auto& c : cs) {
      CK(cudaDeviceSynchronize());
      std::this_thread::sleep_for(std::chrono::seconds(cool_s));
      c.ms.push_back(median_ms(c.run));
      char extra[300];
      std::snprintf(extra, sizeof extra, "\"round\":%d,\"cool_s\":%d,\"algo\":\"%s\"", round, cool_s, c.algo.c_str());
      record("full_clocks_" + c.name, c.ms.back(), extra);
    }
  for (auto& c : cs) {
    std::sort(c.ms.begin(), c.ms.end());
    std::printf("summary %-22s median of round medians %.4f ms (min %.4f, max %.4f)\n", c.name.c_str(),
                c.ms[c.ms.size() / 2], c.ms.front(), c.ms.back());
  }
  CB(cublasSetMathMode(blas(), CUBLAS_DEFAULT_MATH));
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
  bool do_bench = false, do_profile = false, do_quick = false, do_fp32 = false, do_tc = false, prefer_shared = false;
  const char* json = nullptr;
  int quick_rounds = 3, quick_cool = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--bench"))
      do_bench = true;
    else if (!std::strcmp(argv[i], "--profile"))
      do_profile = true;
    else if (!std::strcmp(argv[i], "--quick"))
      do_quick = true;
    else if (!std::strcmp(argv[i], "--fp32-full-clocks"))
      do_fp32 = true;
    else if (!std::strcmp(argv[i], "--tc-full-clocks"))
      do_tc = true;
    else if (!std::strcmp(argv[i], "--prefer-shared"))
      prefer_shared = true;
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      json = argv[++i];
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc)
      iters = std::max(5, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc)
      quick_rounds = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--cool") && i + 1 < argc)
      quick_cool = std::max(0, std::atoi(argv[++i]));
    else {
      std::fprintf(
          stderr,
          "usage: %s [--bench] [--quick] [--fp32-full-clocks] [--tc-full-clocks] [--profile] [--prefer-shared] "
          "[--json PATH] "
          "[--iters N] [--rounds N] [--cool S]\n",
          argv[0]);
      return 2;
    }
  }
  if (!do_bench && !do_profile && !do_quick && !do_fp32 && !do_tc) do_bench = true;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  if (prefer_shared) CK(cudaDeviceSetCacheConfig(cudaFuncCachePreferShared));
  std::printf("device %s, linear_max_out %ld, cuBLASLt %zu%s\n", prop.name, long(sc::linear_max_out(0)),
              cublasLtGetVersion(), prefer_shared ? ", device cache preference: shared" : "");
  try {
    if (do_bench) bench();
    if (do_quick) quick(quick_rounds, quick_cool);
    if (do_fp32) full_clocks(false, quick_rounds, quick_cool);
    if (do_tc) full_clocks(true, quick_rounds, quick_cool);
    if (do_profile) profile();
  } catch (const std::exception& e) {
    std::printf("EXCEPTION %s\n", e.what());
    return 3;
  }
  if (json) {
    FILE* f         = std::fopen(json, "w");
    std::time_t now = std::time(nullptr);
    char date[64];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    std::fprintf(f,
                 "{\"date\":\"%s\",\"device\":\"%s\",\"cublaslt_version\":%zu,\"prefer_shared\":%s,\"iters\":%d,"
                 "\"bench\":[\n%s]}\n",
                 date, prop.name, cublasLtGetVersion(), prefer_shared ? "true" : "false", iters, json_bench.c_str());
    std::fclose(f);
  }
  return 0;
}
