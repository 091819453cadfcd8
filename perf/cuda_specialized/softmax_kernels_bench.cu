// Standalone check and benchmark of softfuse's hand-tuned CUDA softmax kernels (no Kokkos,
// no test framework). Build (from the repository root):
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 \
//        -Xcompiler -fopenmp -Icuda_specialized/include -Icuda_specialized/src \
//        perf/cuda_specialized/softmax_kernels_bench.cu cuda_specialized/src/*.cu \
//        -o build/softmax_kernels_bench
//
// Modes (combine freely; default: --check --bench):
//   --check            correctness against a host double-precision reference (float and double,
//                      in place and out of place, padded and misaligned rows, special rows,
//                      every regime and its thresholds, forced alternative plans)
//   --check-small      the small subset
//   --check-sanitize   a tiny set for compute-sanitizer: every regime by default plan (warp,
//                      warp-row, block 128/256/512, chunk streams of both shapes, clusters for
//                      misaligned rows), each out of place, in place and misaligned, plus every
//                      forced alternative plan (clusters of 2..16, grid groups, register-extended
//                      kernels, lookahead, persistent and not, chunk streams, split)
//   --bench            the workload shapes, a sweep of row lengths and alternative plans,
//                      each against a same-run device-to-device copy of the same buffers
//   --shapes RxC,...   bench only these of its shapes (with their alternatives), no sweep
//   --profile RxC      run the default plan of an RxC fp32 softmax once (for ncu)
//   --json PATH        write the results as JSON
//   --iters N          timed repetitions per shape (default 30, at least 20 recommended)
//   --max-cluster N    checks: skip the cases whose plan uses clusters of more than N blocks
// Exit status: non-zero when any check fails or a CUDA call fails.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "softfuse/cuda_specialized/softmax.hpp"
#include "softmax_kernels.hpp"
#include "softmax_plan.hpp"

namespace sc = softfuse::cuda_specialized;
namespace im = softfuse::cuda_specialized::impl;

#define CK(call)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__,  \
                   __LINE__, cudaGetErrorString(e_));                                         \
      std::exit(2);                                                                           \
    }                                                                                         \
  } while (0)

// ------------------------------------------------------------------------------------------
// random numbers

static inline std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
static inline double unif(std::uint64_t seed, std::uint64_t i) {
  return static_cast<double>(splitmix(seed * 0x632BE59BD9B4E019ull + i) >> 11) * 0x1.0p-53;
}

template <class T>
__global__ void fill_uniform(T* x, std::int64_t n, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint64_t h = seed * 0x632BE59BD9B4E019ull + static_cast<std::uint64_t>(i);
    h += 0x9E3779B97F4A7C15ull;
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
    x[i] = static_cast<T>(static_cast<double>(h >> 40) * 0x1.0p-24);  // uniform [0, 1)
  }
}

// ------------------------------------------------------------------------------------------
// host reference and comparison

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
  bool ok = true;
  double max_rel = 0.0;
  double sum_err = 0.0;
  char why[200] = {0};
};

// x, y: one row of `cols` elements.
template <class T>
RowCheck check_row(const T* x, const T* y, std::int64_t cols) {
  RowCheck rc;
  bool has_nan = false, has_pinf = false;
  double m = -std::numeric_limits<double>::infinity();
  for (std::int64_t c = 0; c < cols; ++c) {
    const double v = static_cast<double>(x[c]);
    if (std::isnan(v)) has_nan = true;
    else if (v == std::numeric_limits<double>::infinity()) has_pinf = true;
    if (v > m) m = v;
  }
  const bool nan_row = has_nan || has_pinf || std::isinf(m);
  if (nan_row) {
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
  long double sl = 0.0;
  for (std::int64_t c = 0; c < cols; ++c) {
    const double v = static_cast<double>(x[c]);
    if (v != -std::numeric_limits<double>::infinity()) sl += std::exp(v - m);
  }
  const double s = static_cast<double>(sl);
  long double ysum = 0.0;  // the checker's own sum must not be the error
  for (std::int64_t c = 0; c < cols; ++c) {
    const double v = static_cast<double>(x[c]);
    const double ref = (v == -std::numeric_limits<double>::infinity()) ? 0.0 : std::exp(v - m) / s;
    const double got = static_cast<double>(y[c]);
    if (!std::isfinite(got) || got < 0.0 || got == kPoison) {
      rc.ok = false;
      std::snprintf(rc.why, sizeof(rc.why), "col %lld: got %g, ref %g", (long long)c, got, ref);
      return rc;
    }
    ysum += got;
    if (ref >= 1e-30) {
      const double rel = std::fabs(got - ref) / ref;
      rc.max_rel = std::max(rc.max_rel, rel);
      if (rel > Tol<T>::rel) {
        rc.ok = false;
        std::snprintf(rc.why, sizeof(rc.why), "col %lld: got %.9g, ref %.9g, rel %.3g", (long long)c,
                      got, ref, rel);
        return rc;
      }
    } else if (std::fabs(got - ref) > 1e-30) {
      rc.ok = false;
      std::snprintf(rc.why, sizeof(rc.why), "col %lld: got %g, ref %g (tiny)", (long long)c, got, ref);
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

// ------------------------------------------------------------------------------------------
// correctness cases

struct CaseResult {
  std::string name;
  std::string plan;
  bool ok;
  double max_rel;
  double max_sum_err;
  std::string why;
};

static std::vector<CaseResult> g_cases;
static int g_failed = 0;
static int g_max_cluster = 16;  // --max-cluster: skip cases whose plan uses larger clusters
static std::vector<std::pair<std::int64_t, std::int64_t>> g_shapes;  // --shapes (empty: all)

enum class Kind { out_of_place, in_place };

struct CaseSpec {
  std::int64_t rows, cols;
  std::int64_t ld_pad = 0;   // ldx = ldy = cols + ld_pad
  std::int64_t offset = 0;   // elements added to both base pointers (breaks 16-byte alignment)
  Kind kind = Kind::out_of_place;
  bool wide = false;         // data uniform in [-8, 8) rather than [0, 1)
  const im::Plan* forced = nullptr;
  std::uint64_t seed = 1;
};

template <class T>
void fill_row_special(T* x, std::int64_t r, std::int64_t cols, const CaseSpec& cs) {
  const double lo = cs.wide ? -8.0 : 0.0, span = cs.wide ? 16.0 : 1.0;
  const std::uint64_t seed = cs.seed * 1000003ull + static_cast<std::uint64_t>(r);
  for (std::int64_t c = 0; c < cols; ++c) x[c] = static_cast<T>(lo + span * unif(seed, c));
  const T inf = std::numeric_limits<T>::infinity();
  const std::int64_t pos = static_cast<std::int64_t>(unif(seed, 1u << 30) * cols) % cols;
  switch (r) {
    case 1: x[pos] = std::numeric_limits<T>::quiet_NaN(); break;
    case 2: x[pos] = inf; break;
    case 3: for (std::int64_t c = 0; c < cols; ++c) x[c] = -inf; break;
    case 4:  // huge finite values: the 1e30 entries share the mass, the rest get 0
      x[pos] = static_cast<T>(1e30);
      x[(pos * 7 + 3) % cols] = static_cast<T>(1e30);
      for (std::int64_t c = 0; c < cols; c += 5) if (x[c] != static_cast<T>(1e30)) x[c] = static_cast<T>(-1e30);
      break;
    case 5: for (std::int64_t c = 0; c < cols; c += 3) x[c] = -inf; if (cols > 1) x[cols - 1] = 0.5; break;
    case 6: for (std::int64_t c = 0; c < cols; ++c) x[c] = -inf; x[pos] = static_cast<T>(-3.0); break;
    case 7: for (std::int64_t c = 0; c < cols; ++c) x[c] = static_cast<T>(5.0); break;
    case 8: x[pos] = static_cast<T>(-1e30); x[(pos + 1) % cols] = static_cast<T>(30.0); break;
    default: break;
  }
}

static double wall() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

template <class T>
bool run_case(const CaseSpec& cs, cudaStream_t stream) {
  const std::int64_t ld = cs.cols + cs.ld_pad;
  const std::int64_t n = cs.rows * ld + cs.offset;
  std::vector<T> hx(static_cast<size_t>(n)), hy(static_cast<size_t>(n));
  const T nan = std::numeric_limits<T>::quiet_NaN();
  std::fill(hx.begin(), hx.end(), nan);  // padding is NaN: reading it would poison a row
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t r = 0; r < cs.rows; ++r) fill_row_special(hx.data() + cs.offset + r * ld, r, cs.cols, cs);
  T *dx = nullptr, *dy = nullptr;
  CK(cudaMalloc(&dx, n * sizeof(T)));
  CK(cudaMemcpyAsync(dx, hx.data(), n * sizeof(T), cudaMemcpyHostToDevice, stream));
  if (cs.kind == Kind::in_place) {
    dy = dx;
    // padding of an in-place matrix: already NaN; must stay NaN
  } else {
    CK(cudaMalloc(&dy, n * sizeof(T)));
    std::vector<T> poison(static_cast<size_t>(n), static_cast<T>(kPoison));
    CK(cudaMemcpyAsync(dy, poison.data(), n * sizeof(T), cudaMemcpyHostToDevice, stream));
    CK(cudaStreamSynchronize(stream));
  }
  const T* x = dx + cs.offset;
  T* y = dy + cs.offset;
  std::string plan_s;
  int dev = 0;
  CK(cudaGetDevice(&dev));
  const im::DeviceInfo& di = im::device_info(dev);
  const im::Problem<T> prob{x, ld, y, ld, cs.rows, cs.cols};
  {
    const im::Plan pl = cs.forced ? *cs.forced : im::make_plan(di, prob);
    if (pl.regime == im::Regime::row && !pl.grid_join && pl.cluster > g_max_cluster) {
      CK(cudaFree(dx));
      if (dy != dx) CK(cudaFree(dy));
      std::printf("skip %s %lldx%lld: %s (--max-cluster %d)\n", Tol<T>::name, (long long)cs.rows,
                  (long long)cs.cols, im::describe(pl).c_str(), g_max_cluster);
      return true;
    }
  }
  std::string err;
  try {
    if (cs.forced) {
      plan_s = im::describe(*cs.forced) + " (forced)";
      im::run_plan(di, *cs.forced, prob, stream);
    } else {
      plan_s = im::describe(im::make_plan(di, prob));
      sc::softmax(x, ld, y, ld, cs.rows, cs.cols, stream);
    }
  } catch (const std::exception& e) {
    err = e.what();
  }
  CK(cudaStreamSynchronize(stream));
  CK(cudaGetLastError());
  CK(cudaMemcpy(hy.data(), dy, n * sizeof(T), cudaMemcpyDeviceToHost));
  CK(cudaFree(dx));
  if (dy != dx) CK(cudaFree(dy));

  CaseResult res;
  char name[200];
  std::snprintf(name, sizeof(name), "%s %lldx%lld ld=%lld off=%lld %s%s", Tol<T>::name,
                (long long)cs.rows, (long long)cs.cols, (long long)ld, (long long)cs.offset,
                cs.kind == Kind::in_place ? "in-place" : "out-of-place", cs.wide ? " wide" : "");
  res.name = name;
  res.plan = plan_s;
  res.ok = err.empty();
  res.why = err;
  res.max_rel = 0;
  res.max_sum_err = 0;
  if (res.ok) {
    std::vector<RowCheck> rcs(static_cast<size_t>(cs.rows));
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t r = 0; r < cs.rows; ++r) {
      // the input as it was: regenerate for in place
      std::vector<T> xr(static_cast<size_t>(cs.cols));
      fill_row_special(xr.data(), r, cs.cols, cs);
      RowCheck rc = check_row(xr.data(), hy.data() + cs.offset + r * ld, cs.cols);
      // padding untouched
      const T pad = cs.kind == Kind::in_place ? nan : static_cast<T>(kPoison);
      for (std::int64_t c = cs.cols; c < ld && rc.ok; ++c) {
        const T v = hy[static_cast<size_t>(cs.offset + r * ld + c)];
        if (!(std::isnan(static_cast<double>(pad)) ? std::isnan(static_cast<double>(v)) : v == pad)) {
          rc.ok = false;
          std::snprintf(rc.why, sizeof(rc.why), "padding col %lld written", (long long)c);
        }
      }
      rcs[static_cast<size_t>(r)] = rc;
    }
    for (std::int64_t c = 0; c < cs.offset; ++c)
      if (!(cs.kind == Kind::in_place ? std::isnan(static_cast<double>(hy[c])) : hy[c] == static_cast<T>(kPoison))) {
        res.ok = false;
        res.why = "element before the matrix written";
      }
    for (std::int64_t r = 0; r < cs.rows; ++r) {
      const RowCheck& rc = rcs[static_cast<size_t>(r)];
      res.max_rel = std::max(res.max_rel, rc.max_rel);
      res.max_sum_err = std::max(res.max_sum_err, rc.sum_err);
      if (!rc.ok && res.ok) {
        res.ok = false;
        res.why = "row " + std::to_string(r) + ": " + rc.why;
      }
    }
  }
  std::printf("%-4s %-62s %-52s max_rel %.2e sum_err %.2e %s\n", res.ok ? "ok" : "FAIL",
              res.name.c_str(), res.plan.c_str(), res.max_rel, res.max_sum_err, res.why.c_str());
  std::fflush(stdout);
  if (!res.ok) ++g_failed;
  g_cases.push_back(res);
  return res.ok;
}

// The chunk streams' partial slots persist across calls, tagged with a per-call epoch, and are
// zeroed per call under graph capture. Checked here: back-to-back calls on two streams with no host
// synchronization between them (a shape, then a larger one that reallocates the slots, then the
// first again), and a captured call replayed on new inputs. Each output row against fp64.
static void check_stream_slots(const im::DeviceInfo& di, cudaStream_t s1) {
  cudaStream_t s2;
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  struct Call {
    std::int64_t rows, cols;
    std::uint64_t seed;
    cudaStream_t s;
  };
  const std::int64_t c1 = 300000, c2 = 700000;  // 8 and 18 chunks of 40-48 KB per row
  const std::vector<Call> calls{{12, c1, 11, s1}, {12, c1, 12, s2}, {16, c2, 13, s1}, {12, c1, 14, s2}, {12, c1, 15, s1}};
  const auto fill = [](std::vector<float>& h, const Call& c) {
    CaseSpec cs;
    cs.seed = c.seed;
    cs.wide = true;
    for (std::int64_t r = 0; r < c.rows; ++r) fill_row_special(h.data() + r * c.cols, r + 9, c.cols, cs);  // r + 9: no special rows
  };
  const auto verify = [](const std::vector<float>& hx, const std::vector<float>& hy, std::int64_t rows, std::int64_t cols,
                         const std::string& what) {
    double worst = 0;
    std::string why;
    for (std::int64_t r = 0; r < rows; ++r) {
      const RowCheck rc = check_row(hx.data() + r * cols, hy.data() + r * cols, cols);
      worst = std::max(worst, rc.max_rel);
      if (!rc.ok && why.empty()) why = "row " + std::to_string(r) + ": " + rc.why;
    }
    std::printf("%-4s stream slots: %-90s max_rel %.2e %s\n", why.empty() ? "ok" : "FAIL", what.c_str(), worst, why.c_str());
    if (!why.empty()) ++g_failed;
  };
  std::vector<std::vector<float>> hx(calls.size()), hy(calls.size());
  std::vector<float*> dx(calls.size()), dy(calls.size());
  for (std::size_t k = 0; k < calls.size(); ++k) {
    const Call& c = calls[k];
    const std::size_t n = static_cast<std::size_t>(c.rows * c.cols);
    hx[k].resize(n);
    hy[k].resize(n);
    fill(hx[k], c);
    CK(cudaMalloc(&dx[k], n * sizeof(float)));
    CK(cudaMalloc(&dy[k], n * sizeof(float)));
    CK(cudaMemcpy(dx[k], hx[k].data(), n * sizeof(float), cudaMemcpyHostToDevice));
  }
  for (std::size_t k = 0; k < calls.size(); ++k)  // no synchronization in between
    sc::softmax(dx[k], calls[k].cols, dy[k], calls[k].cols, calls[k].rows, calls[k].cols, calls[k].s);
  CK(cudaDeviceSynchronize());
  for (std::size_t k = 0; k < calls.size(); ++k) {
    CK(cudaMemcpy(hy[k].data(), dy[k], hy[k].size() * sizeof(float), cudaMemcpyDeviceToHost));
    verify(hx[k], hy[k], calls[k].rows, calls[k].cols,
           "call " + std::to_string(k) + " (" + std::to_string(calls[k].rows) + "x" + std::to_string(calls[k].cols) +
               (calls[k].s == s1 ? ", stream 1, " : ", stream 2, ") +
               im::describe(im::make_plan(di, im::Problem<float>{dx[k], calls[k].cols, dy[k], calls[k].cols,
                                                                  calls[k].rows, calls[k].cols})) + ")");
  }
  // graph: capture one call, replay it on two new inputs copied into its input buffer
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeThreadLocal));
  sc::softmax(dx[0], c1, dy[0], c1, calls[0].rows, c1, s2);
  CK(cudaStreamEndCapture(s2, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  for (std::uint64_t seed : {21, 22}) {
    Call c = calls[0];
    c.seed = seed;
    fill(hx[0], c);
    CK(cudaMemcpy(dx[0], hx[0].data(), hx[0].size() * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaGraphLaunch(exec, s2));
    CK(cudaStreamSynchronize(s2));
    CK(cudaMemcpy(hy[0].data(), dy[0], hy[0].size() * sizeof(float), cudaMemcpyDeviceToHost));
    verify(hx[0], hy[0], c.rows, c.cols, "graph replay on new input (seed " + std::to_string(seed) + ")");
  }
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  for (std::size_t k = 0; k < calls.size(); ++k) {
    CK(cudaFree(dx[k]));
    CK(cudaFree(dy[k]));
  }
  CK(cudaStreamDestroy(s2));
}

static std::int64_t rows_for(std::int64_t cols, std::int64_t budget) {
  return std::max<std::int64_t>(9, std::min<std::int64_t>(4096, budget / std::max<std::int64_t>(1, cols)));
}

enum class Suite { full, small, sanitize };

template <class T>
void check_suite(const im::DeviceInfo& di, cudaStream_t stream, Suite suite) {
  const bool small = suite != Suite::full;
  const bool sanitize = suite == Suite::sanitize;
  const int VV = 16 / static_cast<int>(sizeof(T));
  const std::int64_t es = sizeof(T);
  std::vector<std::int64_t> cols_list = {1, 2, 3, 4, 5, 7, 8, 16, 31, 32, 33, 63, 64, 65, 127, 128, 129,
                                         255, 256, 257, 511, 512, 513, 1000, 1023, 1024, 1025, 1028};
  // regime thresholds: warp limit, cluster-size steps, on-chip capacity
  std::vector<std::int64_t> thresholds = {im::kWarpMaxRowBytes / es, im::kWarpRowMaxBytes / es,
                                          im::kRowNarrowBlockBytes / es};
  if (!small) {
    thresholds.push_back(im::kRowWideBlockBytes / es);
    thresholds.push_back(im::kRowTargetBlockBytes / es);
    thresholds.push_back(im::kRowSingleBlockMinBytes / es);
    thresholds.push_back(2 * im::kRowClusterWideBytes / es);
    thresholds.push_back(im::kRowPairMaxBytes / es);
    for (std::int64_t c : {8, 16}) thresholds.push_back(c * im::kRowClusterBlockBytes / es);
    thresholds.push_back(im::kRowGroupMinBytes / es);
    thresholds.push_back(im::kRowGroupMaxBlocks * im::kRowGroupBlockBytes / es);
    thresholds.push_back(im::kStreamShortRowChunks * im::kStreamShortChunkBytes / es);
    thresholds.push_back(im::onchip_max_cols<T>(di, true));
    thresholds.push_back(im::onchip_max_cols<T>(di, false));
  }
  for (std::int64_t t : thresholds)
    for (std::int64_t d : {-VV, -1, 0, 1, VV}) cols_list.push_back(t + d);
  if (!small) {
    for (std::int64_t c : {2047, 2048, 3000, 8192, 32768, 393216, 1048576}) cols_list.push_back(c);
    cols_list.push_back(im::onchip_max_cols<T>(di, true) + VV);  // one above the capacity
  }
  if (sanitize) {  // one row length per default regime (row bytes), a few rows each
    cols_list.clear();
    for (std::int64_t b : {std::int64_t(12), std::int64_t(132), std::int64_t(400), std::int64_t(4096),
                           im::kWarpMaxRowBytes + 16, im::kWarpRowMaxBytes, im::kWarpRowMaxBytes + 16,
                           im::kRowNarrowBlockBytes + 16, im::kRowTargetBlockBytes,
                           im::kRowTargetBlockBytes + 16, im::kRowSingleBlockMinBytes + 16,
                           2 * im::kRowClusterWideBytes + 16, std::int64_t(230 * 1024),
                           im::kRowPairMaxBytes + 16, 2 * im::kRowPairMaxBytes + 16,
                           im::kRowGroupMinBytes + 16})
      cols_list.push_back(std::max<std::int64_t>(1, b / es));
  }
  std::sort(cols_list.begin(), cols_list.end());
  cols_list.erase(std::unique(cols_list.begin(), cols_list.end()), cols_list.end());

  const std::int64_t budget = small ? (1 << 16) : (1 << 24);
  std::uint64_t seed = 11;
  for (std::int64_t cols : cols_list) {
    if (cols < 1) continue;
    const bool big = cols * es > (512 << 10);
    const std::int64_t rows = sanitize ? 9 : big ? (small ? 9 : 24) : rows_for(cols, budget);
    const std::int64_t rows_small = sanitize ? 9 : big ? 12 : std::min<std::int64_t>(rows, 300);
    CaseSpec a;
    a.rows = rows; a.cols = cols; a.seed = ++seed; a.wide = (cols % 2) == 1;
    run_case<T>(a, stream);
    CaseSpec b = a;  // in place
    b.rows = rows_small; b.kind = Kind::in_place; b.seed = ++seed; b.wide = !a.wide;
    run_case<T>(b, stream);
    CaseSpec c = a;  // misaligned base pointer: scalar path
    c.rows = rows_small; c.offset = 1; c.seed = ++seed;
    run_case<T>(c, stream);
    if (!sanitize && (!big || cols % VV == 0)) {
      CaseSpec d = a;  // padded leading dimension (keeps vectors when cols+VV stays aligned)
      d.rows = rows_small; d.ld_pad = VV; d.seed = ++seed; d.wide = true;
      run_case<T>(d, stream);
    }
  }

  // Forced alternative plans on rows small enough for the sanitizers.
  std::vector<std::pair<im::Plan, std::int64_t>> forced;
  auto row_plan = [&](int vec, int cluster, int threads, int ks, int kr) {
    im::Plan p;
    p.regime = im::Regime::row;
    p.vec = vec; p.cluster = cluster; p.threads = threads; p.ks = ks; p.kr = kr;
    p.grid = 5;  // few resident groups: every group runs several rows (the prefetch path)
    return p;
  };
  if (di.clusters) {
    forced.push_back({row_plan(VV, 2, 256, 2, 0), 2 * 256 * 2 * VV});
    forced.push_back({row_plan(VV, 4, 256, 3, 0), 4 * 256 * 3 * VV - 5 * VV});
    forced.push_back({row_plan(VV, 16, 256, 1, 0), 16 * 256 * VV - 7 * VV});
    forced.push_back({row_plan(1, 8, 512, 2, 0), 8 * 512 * 2 - 3});
    constexpr int KR = im::kRowRegisterVectors;
    forced.push_back({row_plan(VV, 2, 512, 1, KR), 2 * 512 * (KR + 1) * VV - 9 * VV});
    forced.push_back({row_plan(VV, 4, 512, 0, KR), 4 * 512 * KR * VV - 3 * VV});
    forced.push_back({row_plan(VV, 2, 512, 13, 0), 2 * 512 * 13 * VV - 11 * VV});
    forced.push_back({row_plan(VV, 1, 256, 7, 0), 256 * 7 * VV - 2 * VV});
  }
  forced.push_back({row_plan(VV, 1, 512, 3, 0), 512 * 3 * VV - VV});
  {
    im::Plan l = row_plan(VV, 1, 256, 7, 0);  // lookahead on the plain kernels too
    l.lookahead = 1;
    forced.push_back({l, 256 * 7 * VV - 5 * VV});
    im::Plan b = row_plan(VV, 1, 128, 6, 0);
    forced.push_back({b, 128 * 6 * VV - VV});
    if (di.clusters) {
      im::Plan c = row_plan(VV, 4, 512, 13, 0);
      c.lookahead = 1;
      forced.push_back({c, 4 * 512 * 13 * VV - 17 * VV});
      im::Plan d = row_plan(VV, 2, 512, 3, im::kRowRegisterVectors);
      d.lookahead = 0;
      forced.push_back({d, 2 * 512 * (3 + im::kRowRegisterVectors) * VV - 5 * VV});
    }
    im::Plan w = row_plan(VV, 1, 128, 5, 0);  // a warp per row
    w.lookahead = 1;
    forced.push_back({w, 32 * 5 * VV - 3 * VV});
  }
  {
    im::Plan w = row_plan(VV, 1, 128, 5, 0);  // a warp per row
    w.row_threads = 32;
    w.grid = 6;
    forced.push_back({w, 32 * 5 * VV - 3 * VV});
    im::Plan u = w;
    u.vec = 1;
    u.ks = 9;
    forced.push_back({u, 32 * 9 - 5});
  }
  forced.push_back({row_plan(1, 1, 256, 9, 0), 256 * 9 - 100});
  {
    // 128-thread blocks with kBlockRegisterVectors vectors per thread in registers: full,
    // partial groups, no shared-memory vector at all for some threads, with lookahead
    constexpr int KB = im::kBlockRegisterVectors;
    forced.push_back({row_plan(VV, 1, 128, 12, KB), 128 * (12 + KB) * VV - 3 * VV});
    forced.push_back({row_plan(VV, 1, 128, 5, KB), 128 * (5 + KB) * VV - 7 * VV});
    forced.push_back({row_plan(VV, 1, 128, 2, KB), 128 * 3 * VV + VV});
    im::Plan l = row_plan(VV, 1, 128, 12, KB);
    l.lookahead = 1;
    forced.push_back({l, 128 * (12 + KB) * VV - 5 * VV});
    // one row group per row (non-persistent grids): block, warp-row, register-extended block,
    // clusters of 2 and 16, register-extended cluster
    auto np = [&](im::Plan p) { p.persistent = false; p.grid = 0; return p; };
    forced.push_back({np(row_plan(VV, 1, 128, 16, 0)), 128 * 16 * VV - VV});
    im::Plan w = np(row_plan(VV, 1, 128, 6, 0));
    w.row_threads = 32;
    forced.push_back({w, 32 * 6 * VV - 3 * VV});
    forced.push_back({np(row_plan(VV, 1, 128, 12, KB)), 128 * 16 * VV - VV});
    if (di.clusters) {
      forced.push_back({np(row_plan(VV, 2, 256, 5, 0)), 2 * 256 * 5 * VV - 3 * VV});
      forced.push_back({np(row_plan(VV, 16, 256, 2, 0)), 16 * 256 * 2 * VV - 9 * VV});
      im::Plan c = np(row_plan(VV, 4, 512, 2, im::kRowRegisterVectors));
      c.lookahead = 1;
      forced.push_back({c, 4 * 512 * (2 + im::kRowRegisterVectors) * VV - 5 * VV});
    }
  }
  if (di.cooperative) {
    // grid groups (rows joined through global memory): odd group sizes, partial and empty
    // blocks, all 32 lanes of the joining warp, registers, lookahead, scalar accesses
    constexpr int KR = im::kRowRegisterVectors;
    auto gp = [&](int vec, int blocks, int threads, int ks, int kr) {
      im::Plan p = row_plan(vec, blocks, threads, ks, kr);
      p.grid_join = true;
      return p;
    };
    forced.push_back({gp(VV, 3, 256, 2, 0), 3 * 256 * 2 * VV - 5 * VV});
    forced.push_back({gp(VV, 5, 512, 1, KR), 5 * 512 * (1 + KR) * VV - 9 * VV});
    forced.push_back({gp(VV, 32, 256, 1, KR), 32 * 256 * (1 + KR) * VV - 3 * VV});
    forced.push_back({gp(VV, 32, 256, 1, KR), 256 * 3 * VV + VV});  // blocks 1..31 hold nothing
    im::Plan l = gp(VV, 13, 256, 2, KR);
    l.lookahead = 1;
    forced.push_back({l, 13 * 256 * (2 + KR) * VV - 7 * VV});
    forced.push_back({gp(1, 7, 256, 3, 0), 7 * 256 * 3 - 11});
  }
  if (di.cooperative) {
    // chunk streams: partial last chunks, a row of one chunk, rows of exactly as many chunks as
    // blocks, scalar accesses, many steps per block
    auto sp = [&](int vec, int buffers, int lead, std::int64_t chunk, int grid) {
      im::Plan p;
      p.regime = im::Regime::stream;
      p.vec = vec; p.threads = im::kStreamThreads; p.buffers = buffers; p.lead = lead; p.chunk = chunk;
      p.grid = grid;
      return p;
    };
    const int S = im::kStreamThreads;
    forced.push_back({sp(VV, 4, 2, S * 2 * VV, 8), 8 * S * 2 * VV - 5 * VV});
    forced.push_back({sp(VV, 4, 2, S * 2 * VV, 8), S * VV + 3 * VV});
    forced.push_back({sp(VV, 5, 3, S * VV, 6), 2 * 6 * S * VV + VV});  // rows of 2 steps + 1 chunk
    forced.push_back({sp(VV, 6, 4, S * 3 * VV, 3), 300 * VV});  // one chunk per row
    forced.push_back({sp(VV, 6, 4, S * VV, 5), 3 * 5 * S * VV - 7 * VV});
    forced.push_back({sp(1, 4, 2, S * 3, 7), 7 * S * 3 - 13});
    forced.push_back({sp(1, 6, 4, S * 2, 4), 3 * 4 * S * 2 + 1});
    forced.push_back({sp(VV, 4, 2, S * 2 * VV, 9), 3 * S * 2 * VV - VV});  // whole rows per step: 3 of 3 chunks
  }
  {
    im::Plan p; p.regime = im::Regime::split; p.vec = VV; p.chunk = 1024; p.group_rows = 3;
    forced.push_back({p, 5000 - 5000 % VV});
    im::Plan q = p; q.chunk = 64; q.group_rows = 0;  // > 256 chunks: combine kernel
    forced.push_back({q, 20000});
    im::Plan s = p; s.vec = 1; s.chunk = 1000;
    forced.push_back({s, 7777});
  }
  {
    im::Plan w; w.regime = im::Regime::warp; w.vec = 1; w.group = 32; w.chunks = 4;
    forced.push_back({w, 100});
  }
  for (auto& fp : forced) {
    CaseSpec a;
    a.cols = fp.second;
    a.rows = sanitize ? 9 : small ? 21 : 103;
    a.seed = ++seed;
    a.wide = true;
    a.forced = &fp.first;
    if (fp.first.vec == 1) a.offset = 1;
    run_case<T>(a, stream);
    if (sanitize) continue;  // in place changes nothing the sanitizers look at
    CaseSpec b = a;
    b.kind = Kind::in_place;
    b.seed = ++seed;
    run_case<T>(b, stream);
  }
}

// ------------------------------------------------------------------------------------------
// timing

struct Timing {
  double median_ms, min_ms, max_ms;
};

template <class F>
Timing time_it(F&& f, int iters, cudaStream_t stream) {
  for (int i = 0; i < 5; ++i) f();
  CK(cudaStreamSynchronize(stream));
  std::vector<cudaEvent_t> ev(2 * iters);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  for (int i = 0; i < iters; ++i) {
    CK(cudaEventRecord(ev[2 * i], stream));
    f();
    CK(cudaEventRecord(ev[2 * i + 1], stream));
  }
  CK(cudaStreamSynchronize(stream));
  std::vector<double> t(iters);
  for (int i = 0; i < iters; ++i) {
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
    t[i] = ms;
  }
  for (auto& e : ev) CK(cudaEventDestroy(e));
  std::sort(t.begin(), t.end());
  const double med = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
  return {med, t.front(), t.back()};
}

// Wall clock around each call and a stream synchronize (what a caller that fences after every
// call sees: launch and synchronization latency included), 3 warm-ups, median.
template <class F>
Timing time_fenced(F&& f, int iters, cudaStream_t stream) {
  for (int i = 0; i < 3; ++i) f();
  CK(cudaStreamSynchronize(stream));
  std::vector<double> t(iters);
  for (int i = 0; i < iters; ++i) {
    const double t0 = wall();
    f();
    CK(cudaStreamSynchronize(stream));
    t[i] = (wall() - t0) * 1e3;
  }
  std::sort(t.begin(), t.end());
  const double med = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
  return {med, t.front(), t.back()};
}

// Host time of one call: n calls enqueued back to back (no synchronization in between), in us.
template <class F>
double host_us_per_call(F&& f, int n, cudaStream_t stream) {
  f();
  CK(cudaStreamSynchronize(stream));
  const double t0 = wall();
  for (int i = 0; i < n; ++i) f();
  const double t1 = wall();
  CK(cudaStreamSynchronize(stream));
  return (t1 - t0) * 1e6 / n;
}

__global__ void empty_kernel() {}

struct HostRow {
  std::string what;
  double us;
};
static std::vector<HostRow> g_host;

struct BenchRow {
  std::string group;  // "shape", "sweep", "alternative", "repeat", "fenced", "offset"
  std::int64_t rows, cols;
  std::string plan;
  Timing k, copy;
  double gbps, copy_gbps, pct;
  bool sample_ok;
};
static std::vector<BenchRow> g_bench;

// Sampled check of a timed output (rows 0, 1, mid, last): the data are uniform [0, 1).
static bool sample_check(const float* dx, const float* dy, std::int64_t rows, std::int64_t cols) {
  std::vector<float> hx(cols), hy(cols);
  bool ok = true;
  for (std::int64_t r : {std::int64_t(0), std::int64_t(1), rows / 2, rows - 1}) {
    if (r < 0 || r >= rows) continue;
    CK(cudaMemcpy(hx.data(), dx + r * cols, cols * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hy.data(), dy + r * cols, cols * sizeof(float), cudaMemcpyDeviceToHost));
    RowCheck rc = check_row(hx.data(), hy.data(), cols);
    if (!rc.ok) {
      std::printf("  sampled row %lld FAILED: %s\n", (long long)r, rc.why);
      ok = false;
    }
  }
  if (!ok) ++g_failed;
  return ok;
}

static void bench_shape(const std::string& group, float* dx, float* dy, std::int64_t rows,
                        std::int64_t cols, const im::Plan* forced, int iters, cudaStream_t stream,
                        const Timing* copy_in = nullptr, bool fenced = false) {
  int dev = 0;
  CK(cudaGetDevice(&dev));
  const im::DeviceInfo& di = im::device_info(dev);
  const im::Problem<float> prob{dx, cols, dy, cols, rows, cols};
  im::Plan plan = forced ? *forced : im::make_plan(di, prob);
  BenchRow br;
  br.group = group;
  br.rows = rows;
  br.cols = cols;
  br.plan = im::describe(plan) + (forced ? " (forced)" : "");
  try {
    im::run_plan(di, plan, prob, stream);  // validate once
    CK(cudaStreamSynchronize(stream));
  } catch (const std::exception& e) {
    std::printf("%-11s %6lld x %-8lld %-50s not run: %s\n", group.c_str(), (long long)rows,
                (long long)cols, br.plan.c_str(), e.what());
    return;
  }
  CK(cudaMemset(dy, 0xFF, rows * cols * sizeof(float)));  // poison (NaN pattern) before timing
  auto run = [&] {
    if (forced) im::run_plan(di, plan, prob, stream);
    else sc::softmax(dx, cols, dy, cols, rows, cols, stream);
  };
  br.k = fenced ? time_fenced(run, iters, stream) : time_it(run, iters, stream);
  const std::size_t bytes = static_cast<std::size_t>(rows) * cols * sizeof(float);
  auto copy_run = [&] { CK(cudaMemcpyAsync(dy, dx, bytes, cudaMemcpyDeviceToDevice, stream)); };
  br.copy = copy_in ? *copy_in : fenced ? time_fenced(copy_run, iters, stream) : time_it(copy_run, iters, stream);
  if (!copy_in) {  // the copy overwrote y: recompute once for the sample check
    if (forced) im::run_plan(di, plan, prob, stream);
    else sc::softmax(dx, cols, dy, cols, rows, cols, stream);
    CK(cudaStreamSynchronize(stream));
  }
  br.sample_ok = sample_check(dx, dy, rows, cols);
  br.gbps = 2.0 * bytes / (br.k.median_ms * 1e6);
  br.copy_gbps = 2.0 * bytes / (br.copy.median_ms * 1e6);
  br.pct = 100.0 * br.copy.median_ms / br.k.median_ms;
  std::printf("%-11s %6lld x %-8lld %-50s %8.4f ms %7.1f GB/s | copy %8.4f ms %7.1f GB/s | %5.1f%% of copy%s\n",
              group.c_str(), (long long)rows, (long long)cols, br.plan.c_str(), br.k.median_ms, br.gbps,
              br.copy.median_ms, br.copy_gbps, br.pct, br.sample_ok ? "" : "  SAMPLE CHECK FAILED");
  std::fflush(stdout);
  g_bench.push_back(br);
}

static im::Plan rowp(int cluster, int threads, int ks, int kr = 0, int row_threads = 0,
                     int lookahead = -1, bool persistent = true) {
  im::Plan p;
  p.persistent = persistent;
  p.lookahead = lookahead;
  p.regime = im::Regime::row;
  p.vec = 4;
  p.cluster = cluster;
  p.threads = threads;
  p.ks = ks;
  p.kr = kr;
  p.row_threads = row_threads;
  return p;
}

// A grid-group plan: `blocks` per row joined through global memory.
static im::Plan groupp(int blocks, int threads, int ks, int kr) {
  im::Plan p = rowp(blocks, threads, ks, kr);
  p.grid_join = true;
  return p;
}

// Where the default plan is a chunk stream: the plan without that regime, same copy baseline.
static void bench_replaced(const std::string& group, float* dx, float* dy, std::int64_t rows, std::int64_t cols,
                           int iters, cudaStream_t stream, const Timing& copy) {
  int dev = 0;
  CK(cudaGetDevice(&dev));
  const im::DeviceInfo& di = im::device_info(dev);
  const im::Problem<float> prob{dx, cols, dy, cols, rows, cols};
  if (im::make_plan(di, prob).regime != im::Regime::stream) return;
  const im::Plan alt = im::make_plan(di, prob, false);
  bench_shape(group, dx, dy, rows, cols, &alt, iters, stream, &copy);
}

// A chunk-stream plan: `buffers` chunks of `chunk_bytes` per block, reduced `lead` steps ahead.
static im::Plan streamp(int buffers, int lead, std::int64_t chunk_bytes, int grid = 0) {
  im::Plan p;
  p.grid = grid;
  p.regime = im::Regime::stream;
  p.vec = 4;
  p.threads = im::kStreamThreads;
  p.buffers = buffers;
  p.lead = lead;
  p.chunk = chunk_bytes / 4;
  return p;
}

static bool wanted(std::int64_t rows, std::int64_t cols) {
  if (g_shapes.empty()) return true;
  for (const auto& s : g_shapes)
    if (s.first == rows && s.second == cols) return true;
  return false;
}

static void bench_all(int iters, cudaStream_t stream) {
  struct Shape {
    std::int64_t rows, cols;
    std::vector<im::Plan> alts;
  };
  im::Plan split;
  split.regime = im::Regime::split;
  split.vec = 4;
  split.chunk = 16384;
  im::Plan warp_persistent;  // the default warp plan on a one-wave persistent grid
  warp_persistent.regime = im::Regime::warp;
  warp_persistent.vec = 4;
  warp_persistent.group = 32;
  warp_persistent.chunks = 8;
  warp_persistent.grid = 8 * 132;
  constexpr int KB = im::kBlockRegisterVectors;
  constexpr int KR = im::kRowRegisterVectors;
  // alternatives: the plan the default replaced first (rowp's grids are persistent unless said)
  std::vector<Shape> shapes = {
      {65536, 1024, {warp_persistent}},
      {32768, 8192,
       {rowp(1, 128, 16, 0, 0, 0), rowp(1, 128, 16 - KB, KB, 0, 0, false), rowp(1, 256, 8, 0, 0, 0, false)}},
      {8192, 32768, {rowp(1, 512, 16, 0, 0, 0), rowp(1, 512, 16, 0, 0, 0, false)}},
      {1024, 8192, {rowp(1, 128, 16, 0, 0, 0), rowp(1, 128, 16 - KB, KB, 0, 0, false)}},
      // stream defaults: the plan they replaced is timed too (below)
      {128, 1048576,
       {rowp(16, 512, 24, KR, 0, 1), groupp(16, 512, 24, KR), split, streamp(4, 2, 48 << 10), streamp(6, 4, 32 << 10),
        streamp(4, 2, 32 << 10, 128)}},
      {4096, 393216, {rowp(8, 512, 24), streamp(5, 3, 40 << 10), streamp(4, 2, 48 << 10, 132)}},
      {1024, 262144, {streamp(5, 3, 40 << 10)}},
      // between the workloads
      {131072, 2048, {rowp(1, 128, 16, 0, 32, 0)}},
      {65536, 4096, {rowp(1, 128, 32, 0, 32, 0)}},
      {16384, 16384, {rowp(1, 256, 16, 0, 0, 0)}},
      {7710, 34816, {rowp(2, 256, 17)}},
      {5461, 49152, {rowp(2, 256, 24)}},
      {4681, 57344, {rowp(2, 512, 14)}},
      {4096, 65536, {rowp(4, 256, 16), streamp(5, 3, 40 << 10)}},
      {512, 524288, {rowp(16, 512, 16), streamp(4, 2, 48 << 10, 132), streamp(5, 3, 40 << 10), streamp(6, 4, 32 << 10)}},
      {256, 786432, {streamp(4, 2, 48 << 10, 132), streamp(5, 3, 40 << 10)}},
      {64, 2097152, {streamp(6, 4, 32 << 10)}},
  };
  std::size_t max_elems = 0;
  for (auto& s : shapes)
    if (wanted(s.rows, s.cols)) max_elems = std::max<std::size_t>(max_elems, s.rows * s.cols);
  const std::size_t sweep_elems = std::size_t(1) << 28;
  if (g_shapes.empty()) max_elems = std::max(max_elems, sweep_elems);
  float *dx = nullptr, *dy = nullptr;
  CK(cudaMalloc(&dx, max_elems * sizeof(float)));
  CK(cudaMalloc(&dy, max_elems * sizeof(float)));
  for (auto& s : shapes) {
    if (!wanted(s.rows, s.cols)) continue;
    const std::int64_t n = s.rows * s.cols;
    fill_uniform<float><<<4096, 256, 0, stream>>>(dx, n, 1234 + s.cols);
    CK(cudaGetLastError());
    bench_shape("shape", dx, dy, s.rows, s.cols, nullptr, iters, stream);
    const Timing copy = g_bench.empty() ? Timing{} : g_bench.back().copy;
    bench_replaced("alternative", dx, dy, s.rows, s.cols, iters, stream, copy);
    for (auto& alt : s.alts)
      bench_shape("alternative", dx, dy, s.rows, s.cols, &alt, iters, stream, &copy);
  }
  // sweep of row lengths, 2^28 elements (1 GiB) each
  if (g_shapes.empty()) fill_uniform<float><<<4096, 256, 0, stream>>>(dx, sweep_elems, 99);
  CK(cudaGetLastError());
  Timing copy{};
  bool have_copy = false;
  for (std::int64_t cols = 32; g_shapes.empty() && cols <= (std::int64_t(1) << 21); cols *= 2) {
    for (std::int64_t c : {cols, cols * 3 / 2}) {
      if (c > (std::int64_t(1) << 21)) continue;
      const std::int64_t rows = static_cast<std::int64_t>(sweep_elems) / c;
      bench_shape("sweep", dx, dy, rows, c, nullptr, iters, stream, have_copy && rows * c == (std::int64_t)sweep_elems ? &copy : nullptr);
      if (!have_copy && !g_bench.empty() && rows * c == (std::int64_t)sweep_elems) {
        copy = g_bench.back().copy;
        have_copy = true;
      }
      bench_replaced("sweep_without_stream", dx, dy, rows, c, iters, stream, g_bench.back().copy);
    }
  }
  // The workload shapes again at their default plans: CUDA events (a second timing of the same
  // code, for the spread), then wall clock with a synchronize after every call (as the Kokkos
  // benchmark times), then host cost per call.
  for (std::size_t i = 0; i < 6 && i < shapes.size(); ++i) {
    const Shape& sh = shapes[i];
    if (!wanted(sh.rows, sh.cols)) continue;
    fill_uniform<float><<<4096, 256, 0, stream>>>(dx, sh.rows * sh.cols, 4321 + sh.cols);
    CK(cudaGetLastError());
    bench_shape("repeat", dx, dy, sh.rows, sh.cols, nullptr, iters, stream);
    bench_shape("fenced", dx, dy, sh.rows, sh.cols, nullptr, iters, stream, nullptr, true);
    if (sh.cols == 32768 || sh.cols == 8192) {
      // the plan the default replaced, fenced
      if (!sh.alts.empty()) {
        const Timing fc = g_bench.back().copy;
        bench_shape("fenced", dx, dy, sh.rows, sh.cols, &sh.alts[0], iters, stream, &fc, true);
      }
      // rows starting 128 bytes past a 256-byte boundary (as in a Kokkos View: allocation header)
      bench_shape("offset", dx + 32, dy + 32, sh.rows, sh.cols, nullptr, iters, stream);
      // the legacy default stream, fenced
      bench_shape("fenced_legacy_stream", dx, dy, sh.rows, sh.cols, nullptr, iters, cudaStreamLegacy,
                  nullptr, true);
    }
    if (i == 2) {  // 8192x32768: shared-memory carveout and cache preference, then host cost
      const Timing fc = g_bench.back().copy;
      // an application's device-wide cache preference must not move the row kernels
      CK(cudaDeviceSetCacheConfig(cudaFuncCachePreferShared));
      bench_shape("device_prefer_shared", dx, dy, sh.rows, sh.cols, nullptr, iters, stream, &fc);
      bench_shape("device_prefer_shared", dx, dy, sh.rows, sh.cols, &sh.alts[0], iters, stream, &fc);
      CK(cudaDeviceSetCacheConfig(cudaFuncCachePreferL1));
      bench_shape("device_prefer_l1", dx, dy, sh.rows, sh.cols, nullptr, iters, stream, &fc);
      bench_shape("device_prefer_l1", dx, dy, sh.rows, sh.cols, &sh.alts[0], iters, stream, &fc);
      CK(cudaDeviceSetCacheConfig(cudaFuncCachePreferNone));
      bench_shape("driver_default", dx, dy, sh.rows, sh.cols, &sh.alts[0], iters, stream, &fc);
      const std::int64_t r = sh.rows, c = sh.cols;
      const im::Problem<float> prob{dx, c, dy, c, r, c};
      int dev = 0;
      CK(cudaGetDevice(&dev));
      const im::DeviceInfo& di = im::device_info(dev);
      const im::Plan plan = im::make_plan(di, prob);
      const int n = 200;
      g_host.push_back({"softfuse::cuda_specialized::softmax 8192x32768 (plan + launch)",
                        host_us_per_call([&] { sc::softmax(dx, c, dy, c, r, c, stream); }, n, stream)});
      g_host.push_back({"impl::run_plan 8192x32768 (launch of a ready plan)",
                        host_us_per_call([&] { im::run_plan(di, plan, prob, stream); }, n, stream)});
      g_host.push_back({"impl::make_plan 8192x32768 (no launch)",
                        host_us_per_call([&] { (void)im::make_plan(di, prob); }, 100 * n, stream)});
      g_host.push_back({"empty kernel <<<1, 32>>>",
                        host_us_per_call([&] { empty_kernel<<<1, 32, 0, stream>>>(); }, n, stream)});
      g_host.push_back({"cudaMemcpyAsync D2D 1 GiB",
                        host_us_per_call([&] {
                          CK(cudaMemcpyAsync(dy, dx, r * c * sizeof(float), cudaMemcpyDeviceToDevice, stream));
                        }, n, stream)});
      for (const HostRow& h : g_host) std::printf("host        %-64s %8.2f us/call\n", h.what.c_str(), h.us);
    }
  }
  CK(cudaFree(dx));
  CK(cudaFree(dy));
}

// ------------------------------------------------------------------------------------------

static std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

static void write_json(const char* path, const std::string& command, const cudaDeviceProp& prop,
                       const im::DeviceInfo& di, bool checked) {
  FILE* f = std::fopen(path, "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", path);
    std::exit(2);
  }
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::fprintf(f, "{\n  \"date\": \"%s\",\n  \"device\": \"%s\",\n  \"command\": \"%s\",\n", date,
               json_escape(prop.name).c_str(), json_escape(command).c_str());
  std::fprintf(f, "  \"sms\": %d, \"l2_bytes\": %d, \"smem_optin\": %d, \"binary_version\": %d, \"clusters\": %s,\n",
               di.sms, di.l2_bytes, di.smem_optin, di.binary_version, di.clusters ? "true" : "false");
  std::fprintf(f, "  \"cuda_driver\": %d, \"cuda_runtime\": %d,\n", driver, runtime);
  std::fprintf(f, "  \"onchip_max_cols\": {\"float_vec\": %lld, \"float_scalar\": %lld, \"double_vec\": %lld, \"double_scalar\": %lld},\n",
               (long long)im::onchip_max_cols<float>(di, true), (long long)im::onchip_max_cols<float>(di, false),
               (long long)im::onchip_max_cols<double>(di, true), (long long)im::onchip_max_cols<double>(di, false));
  std::fprintf(f, "  \"timing\": \"CUDA events around each launch, %s\",\n",
               "5 warm-ups, median of the timed repetitions; GB/s counts bytes read + written; groups "
               "fenced*: wall clock around each call plus a stream synchronize (copy likewise), 3 warm-ups; "
               "group offset: x and y start 128 bytes past a 256-byte boundary");
  std::fprintf(f, "  \"bench\": [\n");
  for (std::size_t i = 0; i < g_bench.size(); ++i) {
    const BenchRow& b = g_bench[i];
    std::fprintf(f,
                 "    {\"group\": \"%s\", \"rows\": %lld, \"cols\": %lld, \"plan\": \"%s\", \"ms\": %.5f, "
                 "\"ms_min\": %.5f, \"ms_max\": %.5f, \"gbps\": %.1f, \"copy_ms\": %.5f, \"copy_gbps\": %.1f, "
                 "\"pct_of_copy\": %.1f, \"sample_check\": %s}%s\n",
                 b.group.c_str(), (long long)b.rows, (long long)b.cols, json_escape(b.plan).c_str(),
                 b.k.median_ms, b.k.min_ms, b.k.max_ms, b.gbps, b.copy.median_ms, b.copy_gbps, b.pct,
                 b.sample_ok ? "true" : "false", i + 1 < g_bench.size() ? "," : "");
  }
  std::fprintf(f, "  ],\n  \"host_us_per_call\": [\n");
  for (std::size_t i = 0; i < g_host.size(); ++i)
    std::fprintf(f, "    {\"what\": \"%s\", \"us\": %.3f}%s\n", json_escape(g_host[i].what).c_str(),
                 g_host[i].us, i + 1 < g_host.size() ? "," : "");
  std::fprintf(f, "  ],\n  \"checks\": {\"run\": %s, \"cases\": %zu, \"failed\": %d, \"list\": [\n",
               checked ? "true" : "false", g_cases.size(), g_failed);
  for (std::size_t i = 0; i < g_cases.size(); ++i) {
    const CaseResult& c = g_cases[i];
    std::fprintf(f, "    {\"case\": \"%s\", \"plan\": \"%s\", \"ok\": %s, \"max_rel\": %.3e, \"max_sum_err\": %.3e%s%s%s}%s\n",
                 json_escape(c.name).c_str(), json_escape(c.plan).c_str(), c.ok ? "true" : "false",
                 c.max_rel, c.max_sum_err, c.why.empty() ? "" : ", \"why\": \"",
                 json_escape(c.why).c_str(), c.why.empty() ? "" : "\"", i + 1 < g_cases.size() ? "," : "");
  }
  std::fprintf(f, "  ]}\n}\n");
  std::fclose(f);
}

int main(int argc, char** argv) {
  bool check = false, check_small = false, check_sanitize = false, bench = false;
  const char* json = nullptr;
  std::int64_t prof_rows = 0, prof_cols = 0;
  int iters = 30;
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--check") check = true;
    else if (a == "--check-small") check_small = true;
    else if (a == "--check-sanitize") check_sanitize = true;
    else if (a == "--max-cluster" && i + 1 < argc) g_max_cluster = std::atoi(argv[++i]);
    else if (a == "--bench") bench = true;
    else if (a == "--shapes" && i + 1 < argc) {
      for (const char* q = argv[++i]; *q;) {
        std::int64_t r = 0, c = 0;
        int used = 0;
        if (std::sscanf(q, "%" SCNd64 "x%" SCNd64 "%n", &r, &c, &used) != 2) {
          std::fprintf(stderr, "--shapes RxC,RxC,...\n");
          return 2;
        }
        g_shapes.push_back({r, c});
        q += used;
        if (*q == ',') ++q;
      }
    }
    else if (a == "--json" && i + 1 < argc) json = argv[++i];
    else if (a == "--iters" && i + 1 < argc) iters = std::max(1, std::atoi(argv[++i]));
    else if (a == "--profile" && i + 1 < argc) {
      if (std::sscanf(argv[++i], "%" SCNd64 "x%" SCNd64, &prof_rows, &prof_cols) != 2) {
        std::fprintf(stderr, "--profile RxC\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (!check && !check_small && !check_sanitize && !bench && prof_rows == 0) check = bench = true;

  int dev = 0;
  CK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  if (!sc::softmax_available(dev)) {
    std::fprintf(stderr, "softmax kernels not available on device %d (%s)\n", dev, prop.name);
    return 3;
  }
  const im::DeviceInfo& di = im::device_info(dev);
  std::printf("device %d: %s, cc %d, %d SMs, L2 %d B, smem/block opt-in %d B, sm_%d code, clusters %s\n",
              dev, prop.name, di.cc, di.sms, di.l2_bytes, di.smem_optin, di.binary_version,
              di.clusters ? "yes" : "no");
  std::printf("on-chip capacity (cols): float vec %lld, float scalar %lld, double vec %lld, double scalar %lld\n",
              (long long)im::onchip_max_cols<float>(di, true), (long long)im::onchip_max_cols<float>(di, false),
              (long long)im::onchip_max_cols<double>(di, true), (long long)im::onchip_max_cols<double>(di, false));
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  if (prof_rows > 0) {
    float *dx = nullptr, *dy = nullptr;
    const std::int64_t n = prof_rows * prof_cols;
    CK(cudaMalloc(&dx, n * sizeof(float)));
    CK(cudaMalloc(&dy, n * sizeof(float)));
    fill_uniform<float><<<4096, 256, 0, stream>>>(dx, n, 7);
    CK(cudaGetLastError());
    const im::Problem<float> prob{dx, prof_cols, dy, prof_cols, prof_rows, prof_cols};
    std::printf("profile %lld x %lld: %s\n", (long long)prof_rows, (long long)prof_cols,
                im::describe(im::make_plan(di, prob)).c_str());
    sc::softmax(dx, prof_cols, dy, prof_cols, prof_rows, prof_cols, stream);
    CK(cudaStreamSynchronize(stream));
    CK(cudaGetLastError());
    sample_check(dx, dy, prof_rows, prof_cols);
    CK(cudaFree(dx));
    CK(cudaFree(dy));
  }
  const double t0 = wall();
  if (check || check_small || check_sanitize) {
    const Suite suite = check ? Suite::full : check_small ? Suite::small : Suite::sanitize;
    check_suite<float>(di, stream, suite);
    check_suite<double>(di, stream, suite);
    if (di.cooperative) check_stream_slots(di, stream);
    // argument checks
    bool threw = false;
    try { sc::softmax(static_cast<const float*>(nullptr), 3, static_cast<float*>(nullptr), 2, 4, 3, stream); }
    catch (const std::invalid_argument&) { threw = true; }
    std::printf("%-4s ldy < cols rejected\n", threw ? "ok" : "FAIL");
    if (!threw) ++g_failed;
    sc::softmax(static_cast<const float*>(nullptr), 0, static_cast<float*>(nullptr), 0, 0, 0, stream);
    sc::softmax(static_cast<const float*>(nullptr), 5, static_cast<float*>(nullptr), 5, 0, 5, stream);
    std::printf("checks: %zu cases, %d failed (%.1f s)\n", g_cases.size(), g_failed, wall() - t0);
  }
  if (bench) bench_all(iters, stream);
  if (json) write_json(json, command, prop, di, check || check_small || check_sanitize);
  CK(cudaStreamDestroy(stream));
  std::printf("%s: %d failure(s)\n", g_failed ? "FAILED" : "PASSED", g_failed);
  return g_failed ? 1 : 0;
}
