// The GEMM of the fused layers through cuBLASLt: y = x · weightᵀ + bias, row-major, issued as the
// column-major yᵀ = op_T(weightᵀ) · xᵀ with the bias in the epilogue (one bias per row of yᵀ).
//
// One cuBLASLt handle per device and one plan (matrix layouts + the heuristic's algorithm) per
// shape, precision, epilogue and operand alignment, created on first use under a mutex and kept
// until the process ends. A call builds its own small matmul descriptor (it carries the bias
// pointer) and runs with no cuBLASLt workspace, so concurrent calls on several streams share
// nothing mutable; it launches under the driver's default cache preference (DefaultCachePreference,
// defined here).
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "linear_impl.hpp"
#include "runtime.hpp"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

namespace {

constexpr const char* kPrefix = "softfuse::cuda_specialized::linear: ";

void check_lt(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(kPrefix) + what + ": " + cublasLtGetStatusString(st));
}

// Largest power of two (<= 256) dividing the address: what the heuristic may assume.
unsigned alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return a == 0 ? 256u : static_cast<unsigned>(std::min<std::uintptr_t>(256, a & (~a + 1)));
}

// yᵀ[m, n] (pitch ldc) = beta yᵀ + A[k, m]ᵀ (pitch lda) · B[k, n] (pitch ldb) (+ bias[m]).
struct GemmShape {
  int device;
  std::int64_t m, n, k, lda, ldb, ldc;
  cublasComputeType_t compute;
  bool bias, accumulate;
  unsigned align_a, align_b, align_c;

  auto key() const {
    return std::make_tuple(device, m, n, k, lda, ldb, ldc, static_cast<int>(compute), bias, accumulate, align_a,
                           align_b, align_c);
  }
  bool operator<(const GemmShape& o) const { return key() < o.key(); }
};

struct Layouts {
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  Layouts()                          = default;
  Layouts(const Layouts&)            = delete;
  Layouts& operator=(const Layouts&) = delete;
  ~Layouts() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
  }
};

struct Plan {
  Layouts layouts;
  cublasLtMatmulAlgo_t algo;
};

// A matmul descriptor, destroyed with its owner.
struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  MatmulDesc(const GemmShape& s, const float* bias) {
    check_lt(cublasLtMatmulDescCreate(&d, s.compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtEpilogue_t epi = s.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    check_lt(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "transa");
    check_lt(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "transb");
    check_lt(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), "epilogue");
    if (s.bias)
      check_lt(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
               "bias pointer");
  }
  MatmulDesc(const MatmulDesc&)            = delete;
  MatmulDesc& operator=(const MatmulDesc&) = delete;
  ~MatmulDesc() {
    if (d) cublasLtMatmulDescDestroy(d);
  }
};

struct LtCache {
  std::mutex mu;
  std::map<int, cublasLtHandle_t> handles;
  std::map<GemmShape, std::unique_ptr<Plan>> plans;
};

LtCache& lt_cache() {
  static LtCache c;
  return c;
}

// The handle and the plan for s, made once (caller-independent; the lock covers creation only).
std::pair<cublasLtHandle_t, const Plan*> plan_for(const GemmShape& s, const float* bias_example) {
  LtCache& c = lt_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto h = c.handles.find(s.device);
  if (h == c.handles.end()) {
    cublasLtHandle_t handle = nullptr;
    check_lt(cublasLtCreate(&handle), "cublasLtCreate");
    h = c.handles.emplace(s.device, handle).first;
  }
  auto it = c.plans.find(s);
  if (it != c.plans.end()) return {h->second, it->second.get()};

  auto plan  = std::make_unique<Plan>();
  Layouts& l = plan->layouts;
  check_lt(cublasLtMatrixLayoutCreate(&l.a, CUDA_R_32F, s.k, s.m, s.lda), "cublasLtMatrixLayoutCreate(A)");
  check_lt(cublasLtMatrixLayoutCreate(&l.b, CUDA_R_32F, s.k, s.n, s.ldb), "cublasLtMatrixLayoutCreate(B)");
  check_lt(cublasLtMatrixLayoutCreate(&l.c, CUDA_R_32F, s.m, s.n, s.ldc), "cublasLtMatrixLayoutCreate(C)");
  const MatmulDesc desc(s, bias_example);
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, decltype(&cublasLtMatmulPreferenceDestroy)>
      pref_owner(pref, &cublasLtMatmulPreferenceDestroy);
  // Asked with room for a workspace, the heuristic ranks kernels it never offers under a zero
  // limit, and the best of them often need none (H100, 1024 x 8192 x 8192 TF32: 0.33 ms against
  // 0.62 ms for the best under a zero limit). The first that needs no workspace is taken.
  const std::size_t room = std::size_t(32) << 20;
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &room, sizeof(room)),
           "workspace preference");
  const std::uint32_t aligns[3]                       = {s.align_a, s.align_b, s.align_c};
  const cublasLtMatmulPreferenceAttributes_t which[3] = {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES};
  for (int i = 0; i < 3; ++i)
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref, which[i], &aligns[i], sizeof(aligns[i])),
             "alignment preference");
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &aligns[2],
                                                sizeof(aligns[2])),
           "alignment preference");
  constexpr int kCandidates                            = 16;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found                                            = 0;
  check_lt(cublasLtMatmulAlgoGetHeuristic(h->second, desc.d, l.a, l.b, l.c, l.c, pref, kCandidates, results, &found),
           "cublasLtMatmulAlgoGetHeuristic");
  const cublasLtMatmulHeuristicResult_t* pick = nullptr;
  for (int i = 0; i < found && !pick; ++i)
    if (results[i].workspaceSize == 0) pick = &results[i];
  if (pick == nullptr) {  // none among them: ask under a zero limit
    const std::size_t none = 0;
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &none, sizeof(none)),
             "workspace preference");
    check_lt(cublasLtMatmulAlgoGetHeuristic(h->second, desc.d, l.a, l.b, l.c, l.c, pref, 1, results, &found),
             "cublasLtMatmulAlgoGetHeuristic");
    if (found > 0) pick = &results[0];
  }
  if (pick == nullptr)
    throw std::runtime_error(std::string(kPrefix) + "cuBLASLt has no algorithm for a " + std::to_string(s.m) + " x " +
                             std::to_string(s.n) + " x " + std::to_string(s.k) + " GEMM");
  plan->algo = pick->algo;
  return {h->second, c.plans.emplace(s, std::move(plan)).first->second.get()};
}

void gemm(int device, cublasComputeType_t compute, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float* c, std::int64_t ldc, const float* bias,
          bool accumulate, cudaStream_t stream) {
  const GemmShape s{device,       m,           n, k, lda, ldb, ldc, compute, bias != nullptr, accumulate, alignment(a),
                    alignment(b), alignment(c)};
  const auto hp = plan_for(s, bias);
  const MatmulDesc desc(s, bias);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const Layouts& l = hp.second->layouts;
  const DefaultCachePreference preference;  // not Kokkos' device-wide preference (linear.hpp)
  check_lt(cublasLtMatmul(hp.first, desc.d, &alpha, a, l.a, b, l.b, &beta, c, l.c, c, l.c, &hp.second->algo, nullptr, 0,
                          stream),
           "cublasLtMatmul");
}

__device__ __forceinline__ float to_tf32(float v) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(v));
  return __uint_as_float(r);
}

// parts[r, 0:cols] and parts[r, cols:2*cols] = (high, low) of a[r, :], or (low, high) if low_first.
// V = 4: float4 accesses (cols, lda, ldp multiples of 4, 16-byte aligned pointers). Rows over
// blockIdx.y, so no index division.
template <int V>
__global__ void split_tf32x3_kernel(const float* __restrict__ a, std::int64_t lda, std::int64_t rows, std::int64_t cols,
                                    float* __restrict__ parts, std::int64_t ldp, bool low_first) {
  using Vec             = std::conditional_t<V == 4, float4, float>;
  const std::int64_t nv = cols / V;
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const Vec* src = reinterpret_cast<const Vec*>(a + r * lda);
    Vec* first     = reinterpret_cast<Vec*>(parts + r * ldp);
    Vec* second    = reinterpret_cast<Vec*>(parts + r * ldp + cols);
    for (std::int64_t c = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; c < nv;
         c += std::int64_t(gridDim.x) * blockDim.x) {
      Vec v     = src[c], hi, lo;
      float* pv = reinterpret_cast<float*>(&v);
      float* ph = reinterpret_cast<float*>(&hi);
      float* pl = reinterpret_cast<float*>(&lo);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        ph[e] = to_tf32(pv[e]);
        pl[e] = to_tf32(pv[e] - ph[e]);
      }
      first[c]  = low_first ? lo : hi;
      second[c] = low_first ? hi : lo;
    }
  }
}

// y[r, :] = bias, or 0 without one (the logits of an empty inner dimension).
__global__ void broadcast_bias_kernel(const float* __restrict__ bias, float* __restrict__ y, std::int64_t ldy,
                                      std::int64_t rows, std::int64_t cols) {
  const std::int64_t total = rows * cols;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols, c = i - r * cols;
    y[r * ldy + c] = bias ? bias[c] : 0.0f;
  }
}

unsigned grid_for(std::int64_t total) {
  return static_cast<unsigned>(std::min<std::int64_t>((total + 255) / 256, 65536));
}

}  // namespace

void split(const float* a, std::int64_t lda, std::int64_t rows, std::int64_t cols, float* parts, std::int64_t ldp,
           bool low_first, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  const bool vec = cols % 4 == 0 && lda % 4 == 0 && ldp % 4 == 0 &&
                   ((reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(parts)) & 15u) == 0;
  const std::int64_t nv = vec ? cols / 4 : cols;
  const dim3 grid(static_cast<unsigned>(std::min<std::int64_t>((nv + 255) / 256, 1024)),
                  static_cast<unsigned>(std::min<std::int64_t>(rows, 65535)));
  const cudaLaunchConfig_t cfg = plain_launch(grid, 256, stream);
  check_linear(cudaLaunchKernelEx(&cfg, vec ? split_tf32x3_kernel<4> : split_tf32x3_kernel<1>, a, lda, rows, cols,
                                  parts, ldp, low_first),
               "split kernel launch");
}

void linear_gemm(const LinearOperands& op, cudaStream_t stream, std::int64_t tf32x3_max_slice) {
  if (op.batch == 0 || op.out == 0) return;
  if (op.in == 0) {
    const cudaLaunchConfig_t cfg = plain_launch(dim3(grid_for(op.batch * op.out)), 256, stream);
    check_linear(cudaLaunchKernelEx(&cfg, broadcast_bias_kernel, op.bias, op.y, op.ldy, op.batch, op.out),
                 "bias kernel launch");
    return;
  }
  int device = 0;
  check_linear(cudaGetDevice(&device), "cudaGetDevice");
  const std::int64_t m = op.out, n = op.batch, k = op.in;
  if (op.precision != GemmPrecision::tf32x3) {
    const cublasComputeType_t compute =
        op.precision == GemmPrecision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    gemm(device, compute, m, n, k, op.weight, op.ldw, op.x, op.ldx, op.y, op.ldy, op.bias, false, stream);
    return;
  }
  // tf32x3. Weight split [lo | hi] and x split [hi | lo]: over the concatenated K = 2 in, one GEMM
  // gives x_hi w_loᵀ + x_lo w_hiᵀ (+ bias); the high x high product follows in K-slices, each added
  // to y by the epilogue in fp32 (round to nearest), so no tensor-core accumulation runs longer
  // than one slice (kTf32x3MaxSlice). The low x low product (2^-22 relative) is dropped.
  const std::int64_t k2 = 2 * k;
  std::unique_ptr<StreamBuffer> own_weight;
  const float* ws   = op.weight_split;
  std::int64_t ldws = op.ld_split;
  if (ws == nullptr) {
    own_weight = std::make_unique<StreamBuffer>(sizeof(float) * m * k2, stream, "weight split");
    split(op.weight, op.ldw, m, k, own_weight->data(), k2, true, stream);
    ws   = own_weight->data();
    ldws = k2;
  }
  const StreamBuffer xs(sizeof(float) * n * k2, stream, "x split");
  split(op.x, op.ldx, n, k, xs.data(), k2, false, stream);
  const cublasComputeType_t tc = CUBLAS_COMPUTE_32F_FAST_TF32;
  gemm(device, tc, m, n, k2, ws, ldws, xs.data(), k2, op.y, op.ldy, op.bias, false, stream);
  // The fewest slices of at most tf32x3_max_slice, as even as 64-column units allow (one short
  // tail slice would get a slower kernel from the heuristic).
  const std::int64_t max_units = std::max<std::int64_t>(1, tf32x3_max_slice / 64), units = (k + 63) / 64;
  const std::int64_t slices = (units + max_units - 1) / max_units;
  for (std::int64_t i = 0, k0 = 0; i < slices; ++i) {
    const std::int64_t len = std::min(k - k0, 64 * (units / slices + (i < units % slices ? 1 : 0)));
    gemm(device, tc, m, n, len, ws + k + k0, ldws, xs.data() + k0, k2, op.y, op.ldy, nullptr, true, stream);
    k0 += len;
  }
}

}  // namespace impl

namespace {
std::mutex& preference_mutex() {
  static std::mutex m;
  return m;
}
}  // namespace

DefaultCachePreference::DefaultCachePreference() : saved_(cudaFuncCachePreferNone) {
  preference_mutex().lock();
  cudaError_t err = cudaDeviceGetCacheConfig(&saved_);
  if (err == cudaSuccess && saved_ != cudaFuncCachePreferNone) err = cudaDeviceSetCacheConfig(cudaFuncCachePreferNone);
  if (err != cudaSuccess) {
    preference_mutex().unlock();
    impl::throw_linear_cuda(err, "cudaDeviceSetCacheConfig");
  }
}

DefaultCachePreference::~DefaultCachePreference() {
  if (saved_ != cudaFuncCachePreferNone) (void)cudaDeviceSetCacheConfig(saved_);
  preference_mutex().unlock();
}

}  // namespace cuda_specialized
}  // namespace softfuse
