// Benchmark of softfuse's hand-tuned CUDA softmax kernels without Kokkos: CUDA-event timings of the
// workload shapes, a sweep of row lengths and alternative plans, each against a same-run device-to-device
// copy of the same buffers, with a sampled check of every timed output against the double-precision
// reference (the full correctness checks: tests/cuda_specialized/test_softmax_kernels.cu). Built by CMake
// as the target softmax_kernels_bench.
//
//   --bench            (default) the workload shapes, the sweep and the alternative plans
//   --shapes RxC,...   bench only these of its shapes (with their alternatives), no sweep
//   --profile RxC      run the default plan of an RxC fp32 softmax once (for ncu)
//   --json PATH        write the results as JSON
//   --iters N          timed repetitions per shape (default 30, at least 20 recommended)
// Exit status: non-zero when a sampled check fails or a CUDA call fails.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
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
// input data

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

static int g_failed = 0;
static std::vector<std::pair<std::int64_t, std::int64_t>> g_shapes;  // --shapes (empty: all)

static double wall() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
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

static void bench_shape(const std::string& group, float* dx, float* dy, std::int64_t rows, std::int64_t cols,
                        const im::Plan* forced, int iters, cudaStream_t stream, const Timing* copy_in = nullptr,
                        bool fenced = false) {
  int dev = 0;
  CK(cudaGetDevice(&dev));
  const im::DeviceInfo& di = im::device_info(dev);
  const im::Problem<float> prob{dx, cols, dy, cols, rows, cols};
  im::Plan plan = forced ? *forced : im::make_plan(di, prob);
  BenchRow br;
  br.group = group;
  br.rows  = rows;
  br.cols  = cols;
  br.plan  = im::describe(plan) + (forced ? " (forced)" : "");
  try {
    im::run_plan(di, plan, prob, stream);  // validate once
    CK(cudaStreamSynchronize(stream));
  } catch (const std::exception& e) {
    std::printf("%-11s %6lld x %-8lld %-50s not run: %s\n", group.c_str(), (long long)rows, (long long)cols,
                br.plan.c_str(), e.what());
    return;
  }
  // poison (NaN pattern) before timing, on the timed stream: a cudaMemset on the legacy stream is not ordered
  // with a non-blocking stream, and its last blocks could land after the timed calls' stores
  CK(cudaMemsetAsync(dy, 0xFF, rows * cols * sizeof(float), stream));
  auto run = [&] {
    if (forced)
      im::run_plan(di, plan, prob, stream);
    else
      sc::softmax(dx, cols, dy, cols, rows, cols, stream);
  };
  br.k                    = fenced ? time_fenced(run, iters, stream) : time_it(run, iters, stream);
  const std::size_t bytes = static_cast<std::size_t>(rows) * cols * sizeof(float);
  auto copy_run           = [&] { CK(cudaMemcpyAsync(dy, dx, bytes, cudaMemcpyDeviceToDevice, stream)); };
  br.copy = copy_in ? *copy_in : fenced ? time_fenced(copy_run, iters, stream) : time_it(copy_run, iters, stream);
  if (!copy_in) {  // the copy overwrote y: recompute once for the sample check
    if (forced)
      im::run_plan(di, plan, prob, stream);
    else
      sc::softmax(dx, cols, dy, cols, rows, cols, stream);
    CK(cudaStreamSynchronize(stream));
  }
  br.sample_ok = sample_check(dx, dy, rows, cols);
  br.gbps      = 2.0 * bytes / (br.k.median_ms * 1e6);
  br.copy_gbps = 2.0 * bytes / (br.copy.median_ms * 1e6);
  br.pct       = 100.0 * br.copy.median_ms / br.k.median_ms;
  std::printf("%-11s %6lld x %-8lld %-50s %8.4f ms %7.1f GB/s | copy %8.4f ms %7.1f GB/s | %5.1f%% of copy%s\n",
              group.c_str(), (long long)rows, (long long)cols, br.plan.c_str(), br.k.median_ms, br.gbps,
              br.copy.median_ms, br.copy_gbps, br.pct, br.sample_ok ? "" : "  SAMPLE CHECK FAILED");
  std::fflush(stdout);
  g_bench.push_back(br);
}

static im::Plan rowp(int cluster, int threads, int ks, int kr = 0, int row_threads = 0, int lookahead = -1,
                     bool persistent = true) {
  im::Plan p;
  p.persistent  = persistent;
  p.lookahead   = lookahead;
  p.regime      = im::Regime::row;
  p.vec         = 4;
  p.cluster     = cluster;
  p.threads     = threads;
  p.ks          = ks;
  p.kr          = kr;
  p.row_threads = row_threads;
  return p;
}

// A grid-group plan: `blocks` per row joined through global memory.
static im::Plan groupp(int blocks, int threads, int ks, int kr) {
  im::Plan p  = rowp(blocks, threads, ks, kr);
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

// Where the default plan is split: its passes launched plainly and as dependent launches (the default), alternately,
// two rounds, same copy baseline.
static void bench_plain_split(const std::string& group, float* dx, float* dy, std::int64_t rows, std::int64_t cols,
                              int iters, cudaStream_t stream, const Timing& copy) {
  int dev = 0;
  CK(cudaGetDevice(&dev));
  const im::Plan dependent = im::make_plan(im::device_info(dev), im::Problem<float>{dx, cols, dy, cols, rows, cols});
  if (dependent.regime != im::Regime::split) return;
  im::Plan plain  = dependent;
  plain.dependent = false;
  for (int round = 0; round < 2; ++round) {
    bench_shape(group, dx, dy, rows, cols, &plain, iters, stream, &copy);
    bench_shape(group, dx, dy, rows, cols, &dependent, iters, stream, &copy);
  }
}

// A warp plan: `group` lanes per row, `chunks` vectors per lane, `batch` rows per lane group and step.
static im::Plan warpp(int group, int chunks, int batch) {
  im::Plan p;
  p.regime = im::Regime::warp;
  p.vec    = 4;
  p.group  = group;
  p.chunks = chunks;
  p.batch  = batch;
  return p;
}

// A chunk-stream plan: `buffers` chunks of `chunk_bytes` per block, reduced `lead` steps ahead.
static im::Plan streamp(int buffers, int lead, std::int64_t chunk_bytes, int grid = 0) {
  im::Plan p;
  p.grid    = grid;
  p.regime  = im::Regime::stream;
  p.vec     = 4;
  p.threads = im::kStreamThreads;
  p.buffers = buffers;
  p.lead    = lead;
  p.chunk   = chunk_bytes / 4;
  return p;
}

// A split plan: chunks of `chunk_bytes`, `group_rows` rows per pair of passes (0: what a third of L2 holds).
static im::Plan splitp(std::int64_t chunk_bytes, std::int64_t group_rows = 0) {
  im::Plan p;
  p.regime     = im::Regime::split;
  p.vec        = 4;
  p.chunk      = chunk_bytes / 4;
  p.group_rows = group_rows;
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
  split.vec    = 4;
  split.chunk  = 16384;
  im::Plan warp_persistent;  // the default warp plan on a one-wave persistent grid
  warp_persistent.regime = im::Regime::warp;
  warp_persistent.vec    = 4;
  warp_persistent.group  = 32;
  warp_persistent.chunks = 8;
  warp_persistent.grid   = 8 * 132;
  constexpr int KB       = im::kBlockRegisterVectors;
  constexpr int KR       = im::kRowRegisterVectors;
  // alternatives: the plan the default replaced first (rowp's grids are persistent unless said)
  std::vector<Shape> shapes = {
      // rows of 1-4K floats: a warp per row (G = 32, or the warp-row plan) against a row per block (G = 128)
      {65536,
       1024,
       {warp_persistent, rowp(1, 128, 8, 0, 32, 0, false), rowp(1, 128, 2, 0, 0, 0, false), warpp(64, 4, 1),
        warpp(32, 8, 1), warpp(128, 2, 1)}},
      {32768,
       8192,
       {rowp(1, 128, 16, 0, 0, 0), rowp(1, 128, 16 - KB, KB, 0, 0, false), rowp(1, 256, 8, 0, 0, 0, false)}},
      {8192,
       32768,
       {rowp(1, 512, 16, 0, 0, 0), rowp(1, 512, 16, 0, 0, 0, false), streamp(4, 2, 48 << 10, 132),
        streamp(4, 2, 32 << 10, 132), streamp(5, 3, 40 << 10)}},
      // few rows of 32 KB: 256-thread blocks too (more threads per row)
      {1024,
       8192,
       {rowp(1, 128, 16, 0, 0, 0), rowp(1, 128, 16 - KB, KB, 0, 0, false), rowp(1, 256, 8, 0, 0, 0, false)}},
      // stream defaults: the plan they replaced is timed too (below)
      {128,
       1048576,
       {rowp(16, 512, 24, KR, 0, 1), groupp(16, 512, 24, KR), split, streamp(4, 2, 48 << 10), streamp(6, 4, 32 << 10),
        streamp(4, 2, 32 << 10, 128)}},
      {4096, 393216, {rowp(8, 512, 24), streamp(5, 3, 40 << 10), streamp(4, 2, 48 << 10, 132)}},
      {2048, 131072, {streamp(4, 2, 48 << 10, 132)}},
      {1024, 262144, {streamp(5, 3, 40 << 10)}},
      // the other short-row shapes of the API's table, and rows of one vector per lane: row batches
      {4194304, 32, {warpp(8, 1, 1)}},
      {100000,
       1000,
       {warp_persistent, rowp(1, 128, 8, 0, 32, 0, false), rowp(1, 128, 2, 0, 0, 0, false), warpp(64, 4, 1),
        warpp(32, 8, 1), warpp(128, 2, 1)}},
      // 16 KB rows: the persistent warp-row grid, and a block per row (128 threads, also with registers; 256)
      {16384,
       4096,
       {rowp(1, 128, 32, 0, 32, 0), rowp(1, 128, 8, 0, 0, 0, false), rowp(1, 128, 8 - KB, KB, 0, 0, false),
        rowp(1, 256, 4, 0, 0, 0, false), rowp(1, 128, 32, 0, 32, 0, false), warpp(128, 8, 1)}},
      {2097152, 128, {warpp(32, 1, 1)}},
      // between the workloads
      {524288, 512, {warpp(32, 4, 1), warpp(64, 2, 1), warpp(128, 1, 1)}},
      {131072, 2048, {rowp(1, 128, 16, 0, 32, 0), rowp(1, 128, 16, 0, 32, 0, false), warpp(128, 4, 1)}},
      {87381, 3072, {rowp(1, 128, 24, 0, 32, 0, false), warpp(128, 8, 1)}},
      {65536, 4096, {rowp(1, 128, 32, 0, 32, 0), rowp(1, 128, 32, 0, 32, 0, false), warpp(128, 8, 1)}},
      {16384, 16384, {rowp(1, 256, 16, 0, 0, 0)}},
      {7710, 34816, {rowp(2, 256, 17), streamp(4, 2, 48 << 10, 132)}},
      {5461, 49152, {rowp(2, 256, 24), streamp(4, 2, 48 << 10, 132)}},
      {4681, 57344, {rowp(2, 512, 14), streamp(4, 2, 48 << 10, 132)}},
      {4096, 65536, {rowp(4, 256, 16), streamp(5, 3, 40 << 10)}},
      {512,
       524288,
       {rowp(16, 512, 16), streamp(4, 2, 48 << 10, 132), streamp(5, 3, 40 << 10), streamp(6, 4, 32 << 10)}},
      {256, 786432, {streamp(4, 2, 48 << 10, 132), streamp(5, 3, 40 << 10)}},
      {64, 2097152, {streamp(6, 4, 32 << 10)}},
      // rows beyond the stream's reach, and the stream's longest rows: split chunks and groups
      {256,
       2097152,
       {splitp(64 << 10), splitp(128 << 10), splitp(256 << 10), splitp(128 << 10, 4), streamp(5, 3, 40 << 10)}},
      {32,
       8388608,
       {splitp(128 << 10), splitp(128 << 10, 2), splitp(256 << 10, 2), splitp(256 << 10, 4), splitp(128 << 10, 4),
        splitp(256 << 10, 8), splitp(128 << 10, 8), splitp(256 << 10, 16), splitp(256 << 10, 32),
        splitp(64 << 10, 32)}},
      {1, 33554432, {splitp(128 << 10), splitp(256 << 10), splitp(512 << 10), splitp(1 << 20)}},
  };
  std::size_t max_elems = 0;
  for (auto& s : shapes)
    if (wanted(s.rows, s.cols)) max_elems = std::max<std::size_t>(max_elems, s.rows * s.cols);
  const std::size_t sweep_elems = std::size_t(1) << 28;
  if (g_shapes.empty()) max_elems = std::max(max_elems, sweep_elems);
  float *dx = nullptr, *dy = nullptr;
  // room for the offset group's 32 elements past the base pointers
  CK(cudaMalloc(&dx, (max_elems + 32) * sizeof(float)));
  CK(cudaMalloc(&dy, (max_elems + 32) * sizeof(float)));
  for (auto& s : shapes) {
    if (!wanted(s.rows, s.cols)) continue;
    const std::int64_t n = s.rows * s.cols;
    fill_uniform<float><<<4096, 256, 0, stream>>>(dx, n, 1234 + s.cols);
    CK(cudaGetLastError());
    bench_shape("shape", dx, dy, s.rows, s.cols, nullptr, iters, stream);
    const Timing copy = g_bench.empty() ? Timing{} : g_bench.back().copy;
    bench_replaced("alternative", dx, dy, s.rows, s.cols, iters, stream, copy);
    for (auto& alt : s.alts) bench_shape("alternative", dx, dy, s.rows, s.cols, &alt, iters, stream, &copy);
    bench_plain_split("alternative", dx, dy, s.rows, s.cols, iters, stream, copy);
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
      bench_shape("sweep", dx, dy, rows, c, nullptr, iters, stream,
                  have_copy && rows * c == (std::int64_t)sweep_elems ? &copy : nullptr);
      if (!have_copy && !g_bench.empty() && rows * c == (std::int64_t)sweep_elems) {
        copy      = g_bench.back().copy;
        have_copy = true;
      }
      bench_replaced("sweep_without_stream", dx, dy, rows, c, iters, stream, g_bench.back().copy);
    }
  }
  // Short rows 128 bytes past a 256-byte boundary, as in a Kokkos View (its allocation header): the warp kernels'
  // loads then straddle 256-byte blocks. Then the warp and split kernels (no dynamic shared memory) so, under the
  // device-wide cache preference that Kokkos::initialize sets (cudaFuncCachePreferShared).
  int dev = 0;
  CK(cudaGetDevice(&dev));
  for (auto& s : shapes) {
    if (!wanted(s.rows, s.cols)) continue;
    const im::Regime regime =
        im::make_plan(im::device_info(dev), im::Problem<float>{dx, s.cols, dy, s.cols, s.rows, s.cols}).regime;
    if (regime != im::Regime::warp && regime != im::Regime::split) continue;
    fill_uniform<float><<<4096, 256, 0, stream>>>(dx + 32, s.rows * s.cols, 1234 + s.cols);
    CK(cudaGetLastError());
    bench_shape("offset", dx + 32, dy + 32, s.rows, s.cols, nullptr, iters, stream);
    const Timing copy = g_bench.back().copy;
    im::Plan unskewed =
        im::make_plan(im::device_info(dev), im::Problem<float>{dx + 32, s.cols, dy + 32, s.cols, s.rows, s.cols});
    if (unskewed.regime == im::Regime::warp && unskewed.group < 32) {
      unskewed.skew = 0;  // the rows' steps as they come, against the default's skew
      bench_shape("offset", dx + 32, dy + 32, s.rows, s.cols, &unskewed, iters, stream, &copy);
    }
    CK(cudaDeviceSetCacheConfig(cudaFuncCachePreferShared));
    bench_shape("device_prefer_shared", dx + 32, dy + 32, s.rows, s.cols, nullptr, iters, stream, &copy);
    CK(cudaDeviceSetCacheConfig(cudaFuncCachePreferNone));
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
      bench_shape("fenced_legacy_stream", dx, dy, sh.rows, sh.cols, nullptr, iters, cudaStreamLegacy, nullptr, true);
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
      const im::DeviceInfo& di = im::device_info(dev);
      const im::Plan plan      = im::make_plan(di, prob);
      const int n              = 200;
      g_host.push_back({"softfuse::cuda_specialized::softmax 8192x32768 (plan + launch)",
                        host_us_per_call([&] { sc::softmax(dx, c, dy, c, r, c, stream); }, n, stream)});
      g_host.push_back({"impl::run_plan 8192x32768 (launch of a ready plan)",
                        host_us_per_call([&] { im::run_plan(di, plan, prob, stream); }, n, stream)});
      g_host.push_back({"impl::make_plan 8192x32768 (no launch)",
                        host_us_per_call([&] { (void)im::make_plan(di, prob); }, 100 * n, stream)});
      g_host.push_back(
          {"empty kernel <<<1, 32>>>", host_us_per_call([&] { empty_kernel<<<1, 32, 0, stream>>>(); }, n, stream)});
      g_host.push_back(
          {"cudaMemcpyAsync D2D 1 GiB",
           host_us_per_call(
               [&] { CK(cudaMemcpyAsync(dy, dx, r * c * sizeof(float), cudaMemcpyDeviceToDevice, stream)); }, n,
               stream)});
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
                       const im::DeviceInfo& di) {
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
  std::fprintf(f,
               "  \"onchip_max_cols\": {\"float_vec\": %lld, \"float_scalar\": %lld, \"double_vec\": %lld, "
               "\"double_scalar\": %lld},\n",
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
                 b.group.c_str(), (long long)b.rows, (long long)b.cols, json_escape(b.plan).c_str(), b.k.median_ms,
                 b.k.min_ms, b.k.max_ms, b.gbps, b.copy.median_ms, b.copy_gbps, b.pct, b.sample_ok ? "true" : "false",
                 i + 1 < g_bench.size() ? "," : "");
  }
  std::fprintf(f, "  ],\n  \"host_us_per_call\": [\n");
  for (std::size_t i = 0; i < g_host.size(); ++i)
    std::fprintf(f, "    {\"what\": \"%s\", \"us\": %.3f}%s\n", json_escape(g_host[i].what).c_str(), g_host[i].us,
                 i + 1 < g_host.size() ? "," : "");
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

int main(int argc, char** argv) {
  bool bench             = false;
  const char* json       = nullptr;
  std::int64_t prof_rows = 0, prof_cols = 0;
  int iters = 30;
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--bench")
      bench = true;
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
    } else if (a == "--json" && i + 1 < argc)
      json = argv[++i];
    else if (a == "--iters" && i + 1 < argc)
      iters = std::max(1, std::atoi(argv[++i]));
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
  if (!bench && prof_rows == 0) bench = true;

  int dev = 0;
  CK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  if (!sc::softmax_available(dev)) {
    std::fprintf(stderr, "softmax kernels not available on device %d (%s)\n", dev, prop.name);
    return 3;
  }
  const im::DeviceInfo& di = im::device_info(dev);
  std::printf("device %d: %s, cc %d, %d SMs, L2 %d B, smem/block opt-in %d B, sm_%d code, clusters %s\n", dev,
              prop.name, di.cc, di.sms, di.l2_bytes, di.smem_optin, di.binary_version, di.clusters ? "yes" : "no");
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
  if (bench) bench_all(iters, stream);
  if (json) write_json(json, command, prop, di);
  CK(cudaStreamDestroy(stream));
  std::printf("%s: %d failure(s)\n", g_failed ? "FAILED" : "PASSED", g_failed);
  return g_failed ? 1 : 0;
}
