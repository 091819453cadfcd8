// Correctness of softfuse's hand-tuned CUDA softmax kernels (cuda_specialized/softmax.hpp and the plans
// behind it) against the double-precision reference (tests/reference), without Kokkos: float and double, in
// place and out of place, padded and misaligned rows, special rows, every regime and its thresholds, forced
// alternative plans, the chunk streams' slots across streams and graph replays, the split passes replayed from a
// graph, argument checks.
//
//   test_softmax_kernels [--small | --sanitize] [--max-cluster N]
//   --small            the small subset
//   --sanitize         a tiny set for compute-sanitizer: every regime by default plan (warp,
//                      warp-row, block 128/256/512, chunk streams of both shapes, clusters for
//                      misaligned rows), each out of place, in place and misaligned, plus every
//                      forced alternative plan (clusters of 2..16, grid groups, register-extended
//                      kernels, lookahead, persistent and not, chunk streams, split)
//   --max-cluster N    skip the cases whose plan uses clusters of more than N blocks
// Exit status: 0 when every check passes, 1 when one fails, 2 when a CUDA call fails, 77 (skipped) without
// a CUDA device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "softfuse/cuda_specialized/softmax.hpp"
#include "softmax_kernels.hpp"
#include "softmax_launch.hpp"
#include "softmax_plan.hpp"
#include "softmax_row_check.hpp"

namespace sc = softfuse::cuda_specialized;
namespace im = softfuse::cuda_specialized::impl;

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

static int g_cases       = 0;
static int g_failed      = 0;
static int g_max_cluster = 16;  // --max-cluster: skip cases whose plan uses larger clusters

enum class Kind { out_of_place, in_place };

struct CaseSpec {
  std::int64_t rows, cols;
  std::int64_t ld_pad    = 0;  // ldx = ldy = cols + ld_pad
  std::int64_t offset    = 0;  // elements added to both base pointers (breaks 16-byte alignment)
  Kind kind              = Kind::out_of_place;
  bool wide              = false;  // data uniform in [-8, 8) rather than [0, 1)
  const im::Plan* forced = nullptr;
  std::uint64_t seed     = 1;
};

template <class T>
void fill_row_special(T* x, std::int64_t r, std::int64_t cols, const CaseSpec& cs) {
  const double lo = cs.wide ? -8.0 : 0.0, span = cs.wide ? 16.0 : 1.0;
  const std::uint64_t seed = cs.seed * 1000003ull + static_cast<std::uint64_t>(r);
  for (std::int64_t c = 0; c < cols; ++c) x[c] = static_cast<T>(lo + span * unif(seed, c));
  const T inf            = std::numeric_limits<T>::infinity();
  const std::int64_t pos = static_cast<std::int64_t>(unif(seed, 1u << 30) * cols) % cols;
  switch (r) {
    case 1: x[pos] = std::numeric_limits<T>::quiet_NaN(); break;
    case 2: x[pos] = inf; break;
    case 3:
      for (std::int64_t c = 0; c < cols; ++c) x[c] = -inf;
      break;
    case 4:  // huge finite values: the 1e30 entries share the mass, the rest get 0
      x[pos]                  = static_cast<T>(1e30);
      x[(pos * 7 + 3) % cols] = static_cast<T>(1e30);
      for (std::int64_t c = 0; c < cols; c += 5)
        if (x[c] != static_cast<T>(1e30)) x[c] = static_cast<T>(-1e30);
      break;
    case 5:
      for (std::int64_t c = 0; c < cols; c += 3) x[c] = -inf;
      if (cols > 1) x[cols - 1] = 0.5;
      break;
    case 6:
      for (std::int64_t c = 0; c < cols; ++c) x[c] = -inf;
      x[pos] = static_cast<T>(-3.0);
      break;
    case 7:
      for (std::int64_t c = 0; c < cols; ++c) x[c] = static_cast<T>(5.0);
      break;
    case 8:
      x[pos]              = static_cast<T>(-1e30);
      x[(pos + 1) % cols] = static_cast<T>(30.0);
      break;
    default: break;
  }
}

template <class T>
bool run_case(const CaseSpec& cs, cudaStream_t stream) {
  const std::int64_t ld = cs.cols + cs.ld_pad;
  const std::int64_t n  = cs.rows * ld + cs.offset;
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
  T* y       = dy + cs.offset;
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
      std::printf("skip %s %lldx%lld: %s (--max-cluster %d)\n", Tol<T>::name, (long long)cs.rows, (long long)cs.cols,
                  im::describe(pl).c_str(), g_max_cluster);
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
  std::snprintf(name, sizeof(name), "%s %lldx%lld ld=%lld off=%lld %s%s", Tol<T>::name, (long long)cs.rows,
                (long long)cs.cols, (long long)ld, (long long)cs.offset,
                cs.kind == Kind::in_place ? "in-place" : "out-of-place", cs.wide ? " wide" : "");
  res.name        = name;
  res.plan        = plan_s;
  res.ok          = err.empty();
  res.why         = err;
  res.max_rel     = 0;
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
        res.ok  = false;
        res.why = "element before the matrix written";
      }
    for (std::int64_t r = 0; r < cs.rows; ++r) {
      const RowCheck& rc = rcs[static_cast<size_t>(r)];
      res.max_rel        = std::max(res.max_rel, rc.max_rel);
      res.max_sum_err    = std::max(res.max_sum_err, rc.sum_err);
      if (!rc.ok && res.ok) {
        res.ok  = false;
        res.why = "row " + std::to_string(r) + ": " + rc.why;
      }
    }
  }
  std::printf("%-4s %-62s %-52s max_rel %.2e sum_err %.2e %s\n", res.ok ? "ok" : "FAIL", res.name.c_str(),
              res.plan.c_str(), res.max_rel, res.max_sum_err, res.why.c_str());
  std::fflush(stdout);
  if (!res.ok) ++g_failed;
  ++g_cases;
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
  const std::vector<Call> calls{
      {12, c1, 11, s1}, {12, c1, 12, s2}, {16, c2, 13, s1}, {12, c1, 14, s2}, {12, c1, 15, s1}};
  const auto fill = [](std::vector<float>& h, const Call& c) {
    CaseSpec cs;
    cs.seed = c.seed;
    cs.wide = true;
    for (std::int64_t r = 0; r < c.rows; ++r)
      fill_row_special(h.data() + r * c.cols, r + 9, c.cols, cs);  // r + 9: no special rows
  };
  const auto verify = [](const std::vector<float>& hx, const std::vector<float>& hy, std::int64_t rows,
                         std::int64_t cols, const std::string& what) {
    double worst = 0;
    std::string why;
    for (std::int64_t r = 0; r < rows; ++r) {
      const RowCheck rc = check_row(hx.data() + r * cols, hy.data() + r * cols, cols);
      worst             = std::max(worst, rc.max_rel);
      if (!rc.ok && why.empty()) why = "row " + std::to_string(r) + ": " + rc.why;
    }
    std::printf("%-4s stream slots: %-90s max_rel %.2e %s\n", why.empty() ? "ok" : "FAIL", what.c_str(), worst,
                why.c_str());
    if (!why.empty()) ++g_failed;
  };
  std::vector<std::vector<float>> hx(calls.size()), hy(calls.size());
  std::vector<float*> dx(calls.size()), dy(calls.size());
  for (std::size_t k = 0; k < calls.size(); ++k) {
    const Call& c       = calls[k];
    const std::size_t n = static_cast<std::size_t>(c.rows * c.cols);
    hx[k].resize(n);
    hy[k].resize(n);
    fill(hx[k], c);
    CK(cudaMalloc(&dx[k], n * sizeof(float)));
    CK(cudaMalloc(&dy[k], n * sizeof(float)));
    CK(cudaMemcpy(dx[k], hx[k].data(), n * sizeof(float), cudaMemcpyHostToDevice));
  }
  CK(cudaDeviceSynchronize());  // a pageable copy may return before it lands; the calls run on non-blocking streams
  for (std::size_t k = 0; k < calls.size(); ++k)  // no synchronization in between
    sc::softmax(dx[k], calls[k].cols, dy[k], calls[k].cols, calls[k].rows, calls[k].cols, calls[k].s);
  CK(cudaDeviceSynchronize());
  for (std::size_t k = 0; k < calls.size(); ++k) {
    CK(cudaMemcpy(hy[k].data(), dy[k], hy[k].size() * sizeof(float), cudaMemcpyDeviceToHost));
    verify(hx[k], hy[k], calls[k].rows, calls[k].cols,
           "call " + std::to_string(k) + " (" + std::to_string(calls[k].rows) + "x" + std::to_string(calls[k].cols) +
               (calls[k].s == s1 ? ", stream 1, " : ", stream 2, ") +
               im::describe(im::make_plan(
                   di, im::Problem<float>{dx[k], calls[k].cols, dy[k], calls[k].cols, calls[k].rows, calls[k].cols})) +
               ")");
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
    CK(cudaDeviceSynchronize());
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

// The split passes are dependent launches of one another (sm_90 code); captured in a graph they become its
// programmatic edges. Checked here: forced split plans (groups of 3 rows; the combine kernel) captured once each and
// replayed on two new inputs, every row against fp64.
static void check_split_graph(const im::DeviceInfo& di, cudaStream_t stream) {
  im::Plan groups;
  groups.regime      = im::Regime::split;
  groups.vec         = 4;
  groups.chunk       = 1024;
  groups.group_rows  = 3;
  im::Plan combine   = groups;
  combine.chunk      = 64;  // > 256 chunks per row
  combine.group_rows = 0;
  struct Graphed {
    im::Plan plan;
    std::int64_t rows, cols;
  };
  for (const Graphed& g : {Graphed{groups, 10, 5000}, Graphed{combine, 4, 20000}}) {
    const std::size_t n = static_cast<std::size_t>(g.rows * g.cols);
    std::vector<float> hx(n), hy(n);
    float *dx = nullptr, *dy = nullptr;
    CK(cudaMalloc(&dx, n * sizeof(float)));
    CK(cudaMalloc(&dy, n * sizeof(float)));
    const im::Problem<float> p{dx, g.cols, dy, g.cols, g.rows, g.cols};
    im::run_plan(di, g.plan, p, stream);  // first call outside the capture (attributes, carveouts)
    CK(cudaStreamSynchronize(stream));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    im::run_plan(di, g.plan, p, stream);
    CK(cudaStreamEndCapture(stream, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    std::string why;
    for (std::uint64_t seed : {31, 32}) {
      CaseSpec cs;
      cs.seed = seed;
      cs.wide = true;
      for (std::int64_t r = 0; r < g.rows; ++r) fill_row_special(hx.data() + r * g.cols, r + 9, g.cols, cs);
      CK(cudaMemcpy(dx, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice));
      CK(cudaDeviceSynchronize());
      CK(cudaGraphLaunch(exec, stream));
      CK(cudaStreamSynchronize(stream));
      CK(cudaMemcpy(hy.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
      for (std::int64_t r = 0; r < g.rows && why.empty(); ++r) {
        const RowCheck rc = check_row(hx.data() + r * g.cols, hy.data() + r * g.cols, g.cols);
        if (!rc.ok) why = "seed " + std::to_string(seed) + ", row " + std::to_string(r) + ": " + rc.why;
      }
    }
    std::printf("%-4s split passes replayed from a graph: %-50s %s\n", why.empty() ? "ok" : "FAIL",
                im::describe(g.plan).c_str(), why.c_str());
    ++g_cases;
    if (!why.empty()) ++g_failed;
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    CK(cudaFree(dx));
    CK(cudaFree(dy));
  }
}

// The warp and split kernels (no dynamic shared memory) set their own shared-memory carveout: the smallest their
// resident blocks need, the rest L1. Left to the driver it follows the device's preference, and Kokkos::initialize
// sets cudaFuncCachePreferShared device-wide (H200: the warp kernels 7-9 % slower, docs/softmax_regimes.md). Checked
// under that preference: each kernel's carveout after a call that ran it, and the call's rows against fp64.
static void check_carveout(const im::DeviceInfo& di, cudaStream_t stream) {
  CK(cudaDeviceSetCacheConfig(cudaFuncCachePreferShared));
  const std::int64_t rows = 33, cols = 4096;
  float *dx = nullptr, *dy = nullptr;
  CK(cudaMalloc(&dx, rows * cols * sizeof(float)));
  CK(cudaMalloc(&dy, rows * cols * sizeof(float)));
  std::vector<float> hx(rows * cols), hy(rows * cols);
  CaseSpec cs;
  cs.seed = 77;
  cs.wide = true;
  for (std::int64_t r = 0; r < rows; ++r) fill_row_special(hx.data() + r * cols, r + 9, cols, cs);
  CK(cudaMemcpy(dx, hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice));
  im::Plan split;
  split.regime = im::Regime::split;
  split.vec    = 4;
  split.chunk  = 1024;
  for (std::int64_t c : {std::int64_t(32), std::int64_t(1000), cols}) {
    const im::Problem<float> p{dx, c, dy, c, rows, c};
    const im::Plan plan = c == cols ? split : im::make_plan(di, p);
    im::run_plan(di, plan, p, stream);
    CK(cudaStreamSynchronize(stream));
    CK(cudaMemcpy(hy.data(), dy, rows * c * sizeof(float), cudaMemcpyDeviceToHost));
    std::string why;
    for (std::int64_t r = 0; r < rows && why.empty(); ++r) {
      const RowCheck rc = check_row(hx.data() + r * c, hy.data() + r * c, c);  // rows of c columns of the same data
      if (!rc.ok) why = "row " + std::to_string(r) + ": " + rc.why;
    }
    std::vector<const void*> kernels;
    if (plan.regime == im::Regime::warp)
      kernels.push_back(im::warp_kernel<float>(plan.vec, plan.group, plan.chunks, plan.batch));
    else
      kernels = {im::split_partial_kernel<float>(plan.vec), im::split_write_kernel<float>(plan.vec)};
    for (const void* f : kernels) {
      cudaFuncAttributes fa{};
      CK(cudaFuncGetAttributes(&fa, f));
      // set (not the default -1) and below half of the shared memory
      if (why.empty() && (fa.preferredShmemCarveout < 0 || fa.preferredShmemCarveout > 50))
        why = "carveout " + std::to_string(fa.preferredShmemCarveout) + " %";
    }
    std::printf("%-4s carveout under cudaFuncCachePreferShared: %-40s %s\n", why.empty() ? "ok" : "FAIL",
                im::describe(plan).c_str(), why.c_str());
    ++g_cases;
    if (!why.empty()) ++g_failed;
  }
  CK(cudaFree(dx));
  CK(cudaFree(dy));
  CK(cudaDeviceSetCacheConfig(cudaFuncCachePreferNone));
}

static std::int64_t rows_for(std::int64_t cols, std::int64_t budget) {
  return std::max<std::int64_t>(9, std::min<std::int64_t>(4096, budget / std::max<std::int64_t>(1, cols)));
}

enum class Suite { full, small, sanitize };

// The plans of this device with its DRAM bandwidth set to an H100's and an H200's peak (2 x memory clock x bus
// width): below kStreamMaxPeakBytesPerSm per SM every row past one SM takes the chunk stream in 5 x 40 KB chunks and
// rows of 1024 floats a warp each; beyond it every row past 128 KB the stream in 4 x 48 KB chunks with whole rows per
// step (in 5 x 40 KB for rows of more than kStreamAlignedMaxChunks chunks, 6 MB rows of 128), rows beyond one step of
// that stream the split path, and rows past kWarpWideMinRowBytes up to kWarpMaxRowBytes a 128-thread block each.
static void check_bandwidth_rule(const im::DeviceInfo& device) {
  if (!device.clusters || !device.cooperative || device.sms < 100) return;  // the H100's and H200's regimes only
  const auto plan = [&](double bytes_per_s, std::int64_t cols) {
    im::DeviceInfo di   = device;
    di.dram_bytes_per_s = bytes_per_s;
    return im::make_plan(di, im::Problem<float>{nullptr, cols, nullptr, cols, 64, cols});
  };
  const double h100 = 2 * 2619e6 * 640, h200 = 2 * 3201e6 * 768;
  const struct {
    double bytes_per_s;
    std::int64_t cols;
    im::Regime regime;
    int width;  // stream plans: chunks per block (5 x 40 KB, or 4 x 48 KB where the device outruns the stream);
                // warp plans: lanes per row (row plans: a warp per row)
  } cases[] = {{h100, 393216, im::Regime::stream, 5}, {h200, 393216, im::Regime::stream, 4},
               {h200, 131072, im::Regime::stream, 4}, {h100, 524288, im::Regime::stream, 5},
               {h200, 524288, im::Regime::stream, 4}, {h100, 2097152, im::Regime::stream, 5},
               {h200, 2097152, im::Regime::split, 0}, {h200, 1572864, im::Regime::stream, 5},
               {h200, 49152, im::Regime::stream, 4},  {h100, 1024, im::Regime::warp, 32},
               {h200, 512, im::Regime::warp, 32},     {h200, 516, im::Regime::warp, 128},
               {h200, 1024, im::Regime::warp, 128},   {h200, 4096, im::Regime::row, 32},
               {h100, 4096, im::Regime::row, 32},     {h200, 4100, im::Regime::row, 0}};
  for (const auto& c : cases) {
    const im::Plan p = plan(c.bytes_per_s, c.cols);
    const bool ok    = p.regime == c.regime && (c.regime != im::Regime::row || p.row_threads == c.width) &&
                    (c.regime != im::Regime::warp || p.group == c.width) &&
                    (c.regime != im::Regime::stream || p.buffers == c.width);
    std::printf("%-4s %.2f TB/s, %lld columns: %s\n", ok ? "ok" : "FAIL", c.bytes_per_s / 1e12,
                static_cast<long long>(c.cols), im::describe(p).c_str());
    ++g_cases;
    if (!ok) ++g_failed;
  }
}

template <class T>
void check_suite(const im::DeviceInfo& di, cudaStream_t stream, Suite suite) {
  const bool small                    = suite != Suite::full;
  const bool sanitize                 = suite == Suite::sanitize;
  const int VV                        = 16 / static_cast<int>(sizeof(T));
  const std::int64_t es               = sizeof(T);
  std::vector<std::int64_t> cols_list = {1,   2,   3,   4,   5,   7,   8,   16,  31,  32,   33,   63,   64,   65,
                                         127, 128, 129, 255, 256, 257, 511, 512, 513, 1000, 1023, 1024, 1025, 1028};
  // regime thresholds: warp limit, cluster-size steps, on-chip capacity
  std::vector<std::int64_t> thresholds = {im::kWarpMaxRowBytes / es, im::kWarpWideMinRowBytes / es,
                                          im::kWarpRowMaxBytes / es, im::kRowNarrowBlockBytes / es};
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
    for (std::int64_t b :
         {std::int64_t(12), std::int64_t(132), std::int64_t(400), im::kWarpWideMinRowBytes + 16, std::int64_t(4096),
          im::kWarpMaxRowBytes + 16, im::kWarpRowMaxBytes, im::kWarpRowMaxBytes + 16, im::kRowNarrowBlockBytes + 16,
          im::kRowTargetBlockBytes, im::kRowTargetBlockBytes + 16, im::kRowSingleBlockMinBytes + 16,
          2 * im::kRowClusterWideBytes + 16, std::int64_t(230 * 1024), im::kRowPairMaxBytes + 16,
          2 * im::kRowPairMaxBytes + 16, im::kRowGroupMinBytes + 16})
      cols_list.push_back(std::max<std::int64_t>(1, b / es));
  }
  std::sort(cols_list.begin(), cols_list.end());
  cols_list.erase(std::unique(cols_list.begin(), cols_list.end()), cols_list.end());

  const std::int64_t budget = small ? (1 << 16) : (1 << 24);
  std::uint64_t seed        = 11;
  for (std::int64_t cols : cols_list) {
    if (cols < 1) continue;
    const bool big                = cols * es > (512 << 10);
    const std::int64_t rows       = sanitize ? 9 : big ? (small ? 9 : 24) : rows_for(cols, budget);
    const std::int64_t rows_small = sanitize ? 9 : big ? 12 : std::min<std::int64_t>(rows, 300);
    CaseSpec a;
    a.rows = rows;
    a.cols = cols;
    a.seed = ++seed;
    a.wide = (cols % 2) == 1;
    run_case<T>(a, stream);
    CaseSpec b = a;  // in place
    b.rows     = rows_small;
    b.kind     = Kind::in_place;
    b.seed     = ++seed;
    b.wide     = !a.wide;
    run_case<T>(b, stream);
    CaseSpec c = a;  // misaligned base pointer: scalar path
    c.rows     = rows_small;
    c.offset   = 1;
    c.seed     = ++seed;
    run_case<T>(c, stream);
    if (!sanitize && (!big || cols % VV == 0)) {
      CaseSpec d = a;  // padded leading dimension (keeps vectors when cols+VV stays aligned)
      d.rows     = rows_small;
      d.ld_pad   = VV;
      d.seed     = ++seed;
      d.wide     = true;
      run_case<T>(d, stream);
    }
    if (cols % VV == 0 && cols * es <= 256) {
      CaseSpec e = a;  // 128 bytes past a 256-byte boundary, as a Kokkos View: the warp plans' rows skew
      e.rows     = rows_small;
      e.offset   = 128 / es;
      e.seed     = ++seed;
      run_case<T>(e, stream);
    }
  }

  // Forced alternative plans on rows small enough for the sanitizers.
  struct Forced {
    im::Plan plan;
    std::int64_t cols;
    std::int64_t rows = 0;  // 0: the suite's
  };
  std::vector<Forced> forced;
  auto row_plan = [&](int vec, int cluster, int threads, int ks, int kr) {
    im::Plan p;
    p.regime  = im::Regime::row;
    p.vec     = vec;
    p.cluster = cluster;
    p.threads = threads;
    p.ks      = ks;
    p.kr      = kr;
    p.grid    = 5;  // few resident groups: every group runs several rows (the prefetch path)
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
    im::Plan l  = row_plan(VV, 1, 256, 7, 0);  // lookahead on the plain kernels too
    l.lookahead = 1;
    forced.push_back({l, 256 * 7 * VV - 5 * VV});
    im::Plan b = row_plan(VV, 1, 128, 6, 0);
    forced.push_back({b, 128 * 6 * VV - VV});
    if (di.clusters) {
      im::Plan c  = row_plan(VV, 4, 512, 13, 0);
      c.lookahead = 1;
      forced.push_back({c, 4 * 512 * 13 * VV - 17 * VV});
      im::Plan d  = row_plan(VV, 2, 512, 3, im::kRowRegisterVectors);
      d.lookahead = 0;
      forced.push_back({d, 2 * 512 * (3 + im::kRowRegisterVectors) * VV - 5 * VV});
    }
    im::Plan w  = row_plan(VV, 1, 128, 5, 0);  // a warp per row
    w.lookahead = 1;
    forced.push_back({w, 32 * 5 * VV - 3 * VV});
  }
  {
    im::Plan w    = row_plan(VV, 1, 128, 5, 0);  // a warp per row
    w.row_threads = 32;
    w.grid        = 6;
    forced.push_back({w, 32 * 5 * VV - 3 * VV});
    im::Plan u = w;
    u.vec      = 1;
    u.ks       = 9;
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
    im::Plan l  = row_plan(VV, 1, 128, 12, KB);
    l.lookahead = 1;
    forced.push_back({l, 128 * (12 + KB) * VV - 5 * VV});
    // one row group per row (non-persistent grids): block, warp-row, register-extended block,
    // clusters of 2 and 16, register-extended cluster
    auto np = [&](im::Plan p) {
      p.persistent = false;
      p.grid       = 0;
      return p;
    };
    forced.push_back({np(row_plan(VV, 1, 128, 16, 0)), 128 * 16 * VV - VV});
    im::Plan w    = np(row_plan(VV, 1, 128, 6, 0));
    w.row_threads = 32;
    forced.push_back({w, 32 * 6 * VV - 3 * VV});
    forced.push_back({np(row_plan(VV, 1, 128, 12, KB)), 128 * 16 * VV - VV});
    if (di.clusters) {
      forced.push_back({np(row_plan(VV, 2, 256, 5, 0)), 2 * 256 * 5 * VV - 3 * VV});
      forced.push_back({np(row_plan(VV, 16, 256, 2, 0)), 16 * 256 * 2 * VV - 9 * VV});
      im::Plan c  = np(row_plan(VV, 4, 512, 2, im::kRowRegisterVectors));
      c.lookahead = 1;
      forced.push_back({c, 4 * 512 * (2 + im::kRowRegisterVectors) * VV - 5 * VV});
    }
  }
  if (di.cooperative) {
    // grid groups (rows joined through global memory): odd group sizes, partial and empty
    // blocks, all 32 lanes of the joining warp, registers, lookahead, scalar accesses
    constexpr int KR = im::kRowRegisterVectors;
    auto gp          = [&](int vec, int blocks, int threads, int ks, int kr) {
      im::Plan p  = row_plan(vec, blocks, threads, ks, kr);
      p.grid_join = true;
      return p;
    };
    forced.push_back({gp(VV, 3, 256, 2, 0), 3 * 256 * 2 * VV - 5 * VV});
    forced.push_back({gp(VV, 5, 512, 1, KR), 5 * 512 * (1 + KR) * VV - 9 * VV});
    forced.push_back({gp(VV, 32, 256, 1, KR), 32 * 256 * (1 + KR) * VV - 3 * VV});
    forced.push_back({gp(VV, 32, 256, 1, KR), 256 * 3 * VV + VV});  // blocks 1..31 hold nothing
    im::Plan l  = gp(VV, 13, 256, 2, KR);
    l.lookahead = 1;
    forced.push_back({l, 13 * 256 * (2 + KR) * VV - 7 * VV});
    forced.push_back({gp(1, 7, 256, 3, 0), 7 * 256 * 3 - 11});
  }
  if (di.cooperative) {
    // chunk streams: partial last chunks, a row of one chunk, rows of exactly as many chunks as
    // blocks, scalar accesses, many steps per block
    auto sp = [&](int vec, int buffers, int lead, std::int64_t chunk, int grid) {
      im::Plan p;
      p.regime  = im::Regime::stream;
      p.vec     = vec;
      p.threads = im::kStreamThreads;
      p.buffers = buffers;
      p.lead    = lead;
      p.chunk   = chunk;
      p.grid    = grid;
      return p;
    };
    const int S = im::kStreamThreads;
    forced.push_back({sp(VV, 4, 2, S * 2 * VV, 8), 8 * S * 2 * VV - 5 * VV});
    forced.push_back({sp(VV, 4, 2, S * 2 * VV, 8), S * VV + 3 * VV});
    forced.push_back({sp(VV, 5, 3, S * VV, 6), 2 * 6 * S * VV + VV});  // rows of 2 steps + 1 chunk
    forced.push_back({sp(VV, 6, 4, S * 3 * VV, 3), 300 * VV});         // one chunk per row
    forced.push_back({sp(VV, 6, 4, S * VV, 5), 3 * 5 * S * VV - 7 * VV});
    forced.push_back({sp(1, 4, 2, S * 3, 7), 7 * S * 3 - 13});
    forced.push_back({sp(1, 6, 4, S * 2, 4), 3 * 4 * S * 2 + 1});
    forced.push_back({sp(VV, 4, 2, S * 2 * VV, 9), 3 * S * 2 * VV - VV});  // whole rows per step: 3 of 3 chunks
    // the join's batch: the last row of the narrow join (32 lanes x kStreamJoinNarrow chunks), the first of the
    // wide one, the wide join over two round trips (on all resident blocks: 2 x 132 + 1 chunks at lead 3), scalar
    const std::int64_t narrow = 32 * im::kStreamJoinNarrow, wide = 32 * im::kStreamJoinWide;
    forced.push_back({sp(VV, 5, 3, S * VV, 0), narrow * S * VV, 3});
    forced.push_back({sp(VV, 5, 3, S * VV, 0), narrow * S * VV + VV, 3});
    if (2 * di.sms >= wide) forced.push_back({sp(VV, 5, 3, S * VV, 0), wide * S * VV + 3 * VV, 2});
    forced.push_back({sp(1, 6, 4, S, 0), (narrow + 20) * S + 1, 2});
  }
  {
    im::Plan p;
    p.regime     = im::Regime::split;
    p.vec        = VV;
    p.chunk      = 1024;
    p.group_rows = 3;
    forced.push_back({p, 5000 - 5000 % VV});
    im::Plan q   = p;
    q.chunk      = 64;
    q.group_rows = 0;  // > 256 chunks: combine kernel
    forced.push_back({q, 20000});
    im::Plan s = p;
    s.vec      = 1;
    s.chunk    = 1000;
    forced.push_back({s, 7777});
    // rows too long for kSplitMinL2Rows of them in a third of L2: one group of all rows
    im::Plan g   = p;
    g.chunk      = 16384;
    g.group_rows = 0;
    forced.push_back({g, 1200000, 5});
    // the passes launched plainly, not each as a dependent of the one before: groups, and the combine kernel
    im::Plan pp = p, qp = q;
    pp.dependent = qp.dependent = false;
    forced.push_back({pp, 5000 - 5000 % VV});
    forced.push_back({qp, 20000});
  }
  {
    auto warp_plan = [&](int vec, int group, int chunks, int batch, std::int64_t grid) {
      im::Plan p;
      p.regime = im::Regime::warp;
      p.vec    = vec;
      p.group  = group;
      p.chunks = chunks;
      p.batch  = batch;
      p.grid   = grid;
      return p;
    };
    forced.push_back({warp_plan(1, 32, 4, 1, 0), 100});
    // row batches: several rows per lane group and step, the last step partial (rows 1, 2, 31, 33 and the suite's
    // against 32 rows per block and step for G = 8), rows shorter than the group
    auto wb = [&](int group) { return warp_plan(VV, group, 1, im::kWarpRowBatch, 0); };
    for (std::int64_t rows : {1, 2, 31, 33, 0}) forced.push_back({wb(8), 8 * VV, rows});
    forced.push_back({wb(8), 7 * VV});
    forced.push_back({wb(1), VV});
    forced.push_back({wb(16), 13 * VV});
    forced.push_back({wb(32), 29 * VV, 33});
    // steps that start before row 0 (skew), by less than a step, a whole one, and more rows than there are
    for (int skew : {1, 3, 32, 40}) {
      im::Plan q = wb(8);
      q.skew     = skew;
      for (std::int64_t rows : {2, 33}) forced.push_back({q, 8 * VV, rows});
    }
    // groups of several warps (64 and 128 lanes per row, joined through shared memory): full and partial rows, rows
    // shorter than the group, row counts around the block's rows (2 for 64 lanes), on a grid of whole waves and on one
    // that steps over rows several times
    auto wg = [&](int group, int chunks, std::int64_t grid) { return warp_plan(VV, group, chunks, 1, grid); };
    for (std::int64_t rows : {1, 2, 3, 31, 33, 0}) forced.push_back({wg(64, 4, 0), 64 * 4 * VV - 3 * VV, rows});
    forced.push_back({wg(64, 2, 3), 64 * 2 * VV, 33});
    forced.push_back({wg(128, 2, 0), 128 * 2 * VV - VV});
    forced.push_back({wg(128, 8, 5), 128 * 8 * VV - 5 * VV});
    forced.push_back({wg(128, 1, 0), 37 * VV});
    forced.push_back({wg(128, 4, 0), 128 * 4 * VV, 2});
  }
  for (auto& fp : forced) {
    CaseSpec a;
    a.cols   = fp.cols;
    a.rows   = fp.rows > 0 ? fp.rows : sanitize ? 9 : small ? 21 : 103;
    a.seed   = ++seed;
    a.wide   = true;
    a.forced = &fp.plan;
    if (fp.plan.vec == 1) a.offset = 1;
    run_case<T>(a, stream);
    if (sanitize) continue;  // in place changes nothing the sanitizers look at
    CaseSpec b = a;
    b.kind     = Kind::in_place;
    b.seed     = ++seed;
    run_case<T>(b, stream);
  }
}

int main(int argc, char** argv) {
  Suite suite = Suite::full;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--small")
      suite = Suite::small;
    else if (a == "--sanitize")
      suite = Suite::sanitize;
    else if (a == "--max-cluster" && i + 1 < argc)
      g_max_cluster = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (!softfuse_test::cuda_device_present()) return softfuse_test::kNoDevice;
  int dev = 0;
  CK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  if (!sc::softmax_available(dev)) {
    std::printf("softmax kernels not available on device %d (%s): skipped\n", dev, prop.name);
    return softfuse_test::kNoDevice;
  }
  const im::DeviceInfo& di = im::device_info(dev);
  std::printf("device %d: %s, cc %d, %d SMs, L2 %d B, smem/block opt-in %d B, sm_%d code, clusters %s\n", dev,
              prop.name, di.cc, di.sms, di.l2_bytes, di.smem_optin, di.binary_version, di.clusters ? "yes" : "no");
  check_bandwidth_rule(di);
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  check_suite<float>(di, stream, suite);
  check_suite<double>(di, stream, suite);
  if (di.cooperative) check_stream_slots(di, stream);
  check_split_graph(di, stream);
  check_carveout(di, stream);
  // argument checks
  bool threw = false;
  try {
    sc::softmax(static_cast<const float*>(nullptr), 3, static_cast<float*>(nullptr), 2, 4, 3, stream);
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  std::printf("%-4s ldy < cols rejected\n", threw ? "ok" : "FAIL");
  if (!threw) ++g_failed;
  sc::softmax(static_cast<const float*>(nullptr), 0, static_cast<float*>(nullptr), 0, 0, 0, stream);
  sc::softmax(static_cast<const float*>(nullptr), 5, static_cast<float*>(nullptr), 5, 0, 5, stream);
  CK(cudaStreamDestroy(stream));
  std::printf("%s: %d cases, %d failed\n", g_failed ? "FAILED" : "PASSED", g_cases, g_failed);
  return g_failed ? 1 : 0;
}
