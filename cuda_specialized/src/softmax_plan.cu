// The softmax plan: regime and launch shape for a problem on a device (the thresholds of
// softmax_plan.hpp), the on-chip capacity it implies, and a plan's description.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "softmax_kernels.hpp"
#include "softmax_plan.hpp"
#include "softmax_shape.hpp"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

namespace {

int next_pow2(std::int64_t v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

// Fills ks/kr (and threads) for a row plan with the given cluster size; false if it cannot
// hold the row or cannot be resident.
template <class T>
bool fit_row(const DeviceInfo& di, std::int64_t cols, Plan& plan) {
  const int V             = plan.vec;
  const std::int64_t nvec = cols / V;
  if (plan.grid_join ? !di.cooperative : (plan.cluster > 1 && !di.clusters)) return false;
  const int gt           = row_group_threads(plan);
  const std::int64_t pbv = ceil_div(nvec, plan.cluster);  // vectors per block (per row)
  const std::int64_t k   = ceil_div(pbv, gt);             // vectors per thread
  if (k > (1 << 20)) return false;
  // Grid groups are sized for two blocks per SM: registers first take what shared memory can't.
  const int kr_order[2][2] = {{0, kRowRegisterVectors}, {kRowRegisterVectors, 0}};
  for (int kr : kr_order[plan.grid_join ? 1 : 0]) {
    const void* f = row_func<T>(plan, kr);
    if (f == nullptr) continue;
    Plan cand = plan;
    cand.kr   = kr;
    cand.ks   = static_cast<int>(std::max<std::int64_t>(0, k - kr));
    if (kr > 0 && k <= kr) continue;  // the plain kernel holds it
    cand.lookahead = resolve_lookahead<T>(di, cand, f);
    if (row_resident<T>(di, cand, f, cand.lookahead) > 0) {
      plan = cand;
      return true;
    }
  }
  return false;
}
// The device's DRAM moves more per SM than a chunk stream keeps up with (kStreamMaxPeakBytesPerSm): the H200, not
// the H100. Such devices also take a 128-thread block per row for rows of kWarpWideMinRowBytes..kWarpMaxRowBytes.
bool stream_outrun(const DeviceInfo& di) { return di.dram_bytes_per_s > kStreamMaxPeakBytesPerSm * di.sms; }

// The chunk-stream plan for the row (kStream* in softmax_plan.hpp); false if none can run.
template <class T>
bool choose_stream(const DeviceInfo& di, std::int64_t cols, Plan& plan) {
  Plan cand    = plan;
  cand.regime  = Regime::stream;
  cand.threads = kStreamThreads;
  cand.buffers = 4;
  cand.lead    = 2;
  cand.chunk   = kStreamShortChunkBytes / static_cast<std::int64_t>(sizeof(T));
  StreamShape<T> sh;
  const bool fits = stream_shape<T>(di, cand, cols, sh);
  if (sh.blocks <= 0) return false;  // no resident grid (or no cooperative launch)
  // Where the device outruns the stream, whole rows per step: the largest multiple of the row's
  // chunks that the resident blocks hold, if it keeps kStreamAlignedMinShare of them busy.
  const std::int64_t aligned = sh.blocks / sh.nchunks * sh.nchunks;
  const bool outrun          = stream_outrun(di);
  if (outrun && fits && sh.nchunks <= kStreamAlignedMaxChunks && aligned * 100 >= kStreamAlignedMinShare * sh.blocks) {
    cand.grid = aligned;
  } else if (outrun && !fits) {
    // Rows beyond one step of the grid: the split path (H200, 8 MB rows: 64.9 % of copy against 55.5 % in
    // 5 x 40 KB chunks; perf/results/h200/cuda_exp_select_ab.json).
    return false;
  } else if (!outrun || sh.nchunks > kStreamShortRowChunks) {
    cand.buffers = 5;
    cand.lead    = 3;
    cand.chunk   = kStreamLongChunkBytes / static_cast<std::int64_t>(sizeof(T));
  }
  if (!stream_shape<T>(di, cand, cols, sh)) return false;
  plan = cand;
  return true;
}

// The row regime, by the thresholds of softmax_plan.hpp. If a choice cannot hold the row or be
// resident: larger clusters, then smaller ones, then one block.
template <class T>
bool choose_row(const DeviceInfo& di, std::int64_t cols, Plan& plan, bool stream) {
  const std::int64_t es        = static_cast<std::int64_t>(sizeof(T));
  const int cmax               = di.clusters ? 16 : 1;
  const std::int64_t row_bytes = cols * es;
  auto attempt                 = [&](int cluster, int threads, int row_threads, bool grid_join = false) {
    Plan cand        = plan;
    cand.regime      = Regime::row;
    cand.cluster     = cluster;
    cand.grid_join   = grid_join;
    cand.threads     = threads;
    cand.row_threads = row_threads;
    cand.lookahead   = -1;
    // One block (warp-row: one block of four rows) per row group, replaced by the hardware as
    // blocks finish; clusters stay persistent. Measured on the H100 (docs/softmax_regimes.md): 91 -> 99% of
    // copy for 32-64 KB rows (a block per row) and 91-93 -> 99% for 8-16 KB rows (a warp per
    // row), while non-persistent clusters of 16 fell from 91% to 76%.
    cand.persistent = cluster > 1;
    if (!fit_row<T>(di, cols, cand)) return false;
    plan = cand;
    return true;
  };
  if (row_bytes <= kWarpRowMaxBytes && attempt(1, 128, 32)) return true;
  if (row_bytes <= kRowNarrowBlockBytes && attempt(1, 128, 0)) return true;
  if (row_bytes <= kRowTargetBlockBytes && attempt(1, row_bytes > kRowWideBlockBytes ? 512 : 256, 0)) return true;
  // Where the device outruns the stream, rows past kRowSingleBlockMinBytes take it first (H200, kernels alone,
  // perf/results/h200/cuda_one_sm_rows.json: 136 / 192 / 224 KB rows 89.3 / 93.3 / 86.6 % of copy in 4 x 48 KB
  // chunks against 82.8 / 90.4 / 85.0 % for one 512-thread block per row; 128 KB rows keep clusters of 2, 86.0
  // against 85.1 %).
  const bool stream_row = stream && plan.vec > 1 && row_bytes > kRowSingleBlockMinBytes;
  if (stream_row && stream_outrun(di) && choose_stream<T>(di, cols, plan)) return true;
  // Rows past kRowSingleBlockMinBytes that one SM holds: one 512-thread block per row, measured
  // at 97% of copy on 192 KB rows against 92-94% in clusters of 2 (at 128 KB the two were even).
  if (row_bytes > kRowSingleBlockMinBytes && attempt(1, 512, 0)) return true;
  // Longer rows: a chunk stream (vector rows); where it cannot hold the row (on a GPU with few
  // multiprocessors), grid groups and clusters. Measured on the H100 against the plans it
  // replaced: 256 KB - 6 MB rows 89.6-98.1% of copy against 38-91% (clusters of 2 to 16, grid
  // groups, split); 128 KB rows 92.1% against 93.8% for clusters of 2, which keep 64-128 KB.
  if (stream_row && choose_stream<T>(di, cols, plan)) return true;
  // Rows beyond 16 blocks of kRowClusterWideBytes, where clusters of 16 need one 512-thread
  // block per SM and only 7 such clusters are resident on the H100 (112 of 132 SMs): a grid
  // group of 256-thread blocks, two per SM, so 8 rows of 4 MB are in flight on 128 SMs.
  // Vector rows on sm_90 code only: measured on the H100 alone.
  if (row_bytes > kRowGroupMinBytes && plan.vec > 1 && di.clusters) {
    const std::int64_t g = ceil_div(row_bytes, kRowGroupBlockBytes);
    if (g <= kRowGroupMaxBlocks && attempt(static_cast<int>(g), 256, 0, true)) return true;
  }
  int pref = 2;
  if (row_bytes > kRowPairMaxBytes) {
    pref = 4;
    while (pref < cmax && ceil_div(row_bytes, pref) > kRowClusterBlockBytes) pref *= 2;
  }
  pref = std::min(pref, std::max(cmax, 2));
  int order[6];
  int n = 0;
  if (cmax > 1) {
    for (int c = pref; c <= cmax; c *= 2) order[n++] = c;
    for (int c = pref / 2; c >= 2; c /= 2) order[n++] = c;
  }
  order[n++] = 1;
  for (int i = 0; i < n; ++i) {
    const std::int64_t block_bytes = ceil_div(row_bytes, order[i]);
    const int threads = block_bytes > (order[i] > 1 ? kRowClusterWideBytes : kRowWideBlockBytes) ? 512 : 256;
    if (attempt(order[i], threads, 0)) return true;
  }
  return false;
}
}  // namespace

template <class T>
bool vector_ok(const Problem<T>& p) {
  const int V        = vec_width<T>();
  const auto aligned = [](const void* q) { return (reinterpret_cast<std::uintptr_t>(q) & 15u) == 0; };
  return p.cols % V == 0 && p.ldx % V == 0 && p.ldy % V == 0 && aligned(p.x) && aligned(p.y);
}

template <class T>
Plan make_plan(const DeviceInfo& di, const Problem<T>& p, bool stream) {
  Plan plan;
  plan.vec                     = vector_ok(p) ? vec_width<T>() : 1;
  const std::int64_t es        = static_cast<std::int64_t>(sizeof(T));
  const std::int64_t row_bytes = p.cols * es;
  if (row_bytes <= kWarpMaxRowBytes) {
    plan.regime             = Regime::warp;
    const std::int64_t nvec = ceil_div(p.cols, plan.vec);
    if (plan.vec > 1 && stream_outrun(di) && row_bytes > kWarpWideMinRowBytes) {
      // a row over the whole 128-thread block, two vectors per lane
      plan.group  = kWarpBlockThreads;
      plan.chunks = static_cast<int>(ceil_div(nvec, kWarpBlockThreads));
      return plan;
    }
    if (nvec <= 16) {
      plan.group  = next_pow2(nvec);
      plan.chunks = 1;
    } else {
      plan.group                  = 32;
      const std::int64_t per_lane = ceil_div(nvec, 32);
      plan.chunks                 = plan.vec > 1 ? static_cast<int>(per_lane) : next_pow2(per_lane);
    }
    // rows of one vector per lane: kWarpRowBatch rows per lane group and step, their loads in flight together
    if (plan.vec > 1 && plan.chunks == 1) plan.batch = kWarpRowBatch;
    return plan;
  }
  if (choose_row<T>(di, p.cols, plan, stream)) return plan;
  plan.regime = Regime::split;
  plan.chunk  = kSplitChunkBytes / es;
  return plan;
}
template <class T>
std::int64_t onchip_max_cols(const DeviceInfo& di, bool vector) {
  // One pass (one read, one write) for every length up to a limit: bisect on "make_plan does not
  // pick the split path".
  const int V = vector ? vec_width<T>() : 1;
  auto onchip = [&](std::int64_t cols) {
    T* const base = reinterpret_cast<T*>(std::uintptr_t(256) + (vector ? 0 : sizeof(T)));
    const Problem<T> p{base, cols, base, cols, 1, cols};
    return make_plan(di, p).regime != Regime::split;
  };
  std::int64_t lo = V, hi = V;  // lo on chip, hi not (in units of V)
  while (onchip(hi * V)) {
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const std::int64_t mid      = lo + (hi - lo) / 2;
    (onchip(mid * V) ? lo : hi) = mid;
  }
  return lo * V;
}

std::string describe(const Plan& plan) {
  char buf[160];
  switch (plan.regime) {
    case Regime::warp:
      std::snprintf(buf, sizeof(buf), "warp vec=%d group=%d chunks=%d batch=%d", plan.vec, plan.group, plan.chunks,
                    plan.batch);
      break;
    case Regime::row:
      std::snprintf(buf, sizeof(buf), "%s vec=%d cluster=%d threads=%d ks=%d kr=%d la=%d",
                    plan.grid_join     ? "group"
                    : plan.cluster > 1 ? "cluster"
                                       : (plan.row_threads == 32 ? "warprow" : "block"),
                    plan.vec, plan.cluster, plan.threads, plan.ks, plan.kr, plan.lookahead);
      break;
    case Regime::stream:
      std::snprintf(buf, sizeof(buf), "stream vec=%d threads=%d chunk=%lld buffers=%d lead=%d", plan.vec, plan.threads,
                    static_cast<long long>(plan.chunk), plan.buffers, plan.lead);
      break;
    case Regime::split:
      std::snprintf(buf, sizeof(buf), "split vec=%d chunk=%lld group_rows=%lld", plan.vec,
                    static_cast<long long>(plan.chunk), static_cast<long long>(plan.group_rows));
      break;
  }
  std::string s(buf);
  if (plan.regime == Regime::warp && plan.skew >= 0) s += " skew=" + std::to_string(plan.skew);
  if (plan.regime == Regime::split && !plan.dependent) s += " dependent=0";
  if (plan.grid > 0) s += " grid=" + std::to_string(plan.grid);
  if (plan.regime == Regime::row && !plan.persistent) s += " nonpersistent";
  return s;
}
template bool vector_ok<float>(const Problem<float>&);
template bool vector_ok<double>(const Problem<double>&);
template Plan make_plan<float>(const DeviceInfo&, const Problem<float>&, bool);
template Plan make_plan<double>(const DeviceInfo&, const Problem<double>&, bool);
template std::int64_t onchip_max_cols<float>(const DeviceInfo&, bool);
template std::int64_t onchip_max_cols<double>(const DeviceInfo&, bool);

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse
