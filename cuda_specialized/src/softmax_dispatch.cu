// Public entry points, device queries (once per device, thread-safe), regime choice and launch.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>

#include <cuda_runtime.h>

#include "softfuse/cuda_specialized/softmax.hpp"
#include "softmax_kernels.hpp"
#include "softmax_plan.hpp"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

namespace {

constexpr const char* kPrefix = "softfuse::cuda_specialized::softmax: ";

[[noreturn]] void throw_invalid(const std::string& what) {
  throw std::invalid_argument(std::string(kPrefix) + what);
}

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw_cuda(err, what);
}

// Everything learnt from the runtime is cached here, under one mutex.
struct FuncInfo {
  int static_smem = 0;
  int max_dynamic_smem = 0;  // what the attribute was raised to
  int binary_version = 0;
  int carveout = cudaSharedmemCarveoutDefault;  // the preferred carveout last set (percent)
};

struct Cache {
  std::mutex mu;
  std::map<int, DeviceInfo> devices;
  std::map<int, cudaMemPool_t> pools;
  std::map<std::pair<int, const void*>, FuncInfo> funcs;
  std::map<std::tuple<int, const void*, int, std::int64_t, int>, int> occupancy;
};

Cache& cache() {
  static Cache c;
  return c;
}

// Caller holds the lock. Raises the dynamic shared memory limit to the device maximum and
// allows non-portable cluster sizes, once per (device, kernel).
FuncInfo& func_info_locked(const DeviceInfo& di, const void* func, bool clustered) {
  Cache& c = cache();
  const auto key = std::make_pair(di.device, func);
  auto it = c.funcs.find(key);
  if (it != c.funcs.end()) return it->second;
  cudaFuncAttributes attr{};
  check(cudaFuncGetAttributes(&attr, func), "cudaFuncGetAttributes");
  FuncInfo fi;
  fi.static_smem = static_cast<int>(attr.sharedSizeBytes);
  fi.binary_version = attr.binaryVersion;
  fi.max_dynamic_smem = std::max(0, di.smem_optin - fi.static_smem);
  check(cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, fi.max_dynamic_smem),
        "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  if (clustered) {
    check(cudaFuncSetAttribute(func, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
          "cudaFuncSetAttribute(NonPortableClusterSizeAllowed)");
  }
  return c.funcs.emplace(key, fi).first->second;
}

// A launch configuration; with `cluster` > 0 it carries that cluster dimension as an attribute,
// with `cooperative` the cooperative-launch attribute (all blocks resident at once), stored in
// `attr` (which must outlive the configuration).
cudaLaunchConfig_t launch_config(dim3 grid, int threads, std::int64_t smem, int cluster,
                                 bool cooperative, cudaStream_t stream, cudaLaunchAttribute& attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = stream;
  if (cluster > 0) {
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = static_cast<unsigned>(cluster);
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  } else if (cooperative) {
    attr.id = cudaLaunchAttributeCooperative;
    attr.val.cooperative = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  return cfg;
}

}  // namespace

// Resident blocks (cluster == 0: plain launch) or resident clusters of `cluster` blocks.
// Cached: after the first call for a launch shape this is one uncontended lock and a map lookup.
int max_active(const DeviceInfo& di, const void* func, int threads, std::int64_t smem,
               int cluster) {
  std::lock_guard<std::mutex> lock(cache().mu);
  Cache& c = cache();
  const auto key = std::make_tuple(di.device, func, threads, smem, cluster);
  auto it = c.occupancy.find(key);
  if (it != c.occupancy.end()) return it->second;
  FuncInfo& fi = func_info_locked(di, func, cluster > 0);
  // Residency at the largest carveout, whatever preference the kernel or the device carries.
  const bool restore = fi.carveout != cudaSharedmemCarveoutMaxShared;
  if (restore)
    check(cudaFuncSetAttribute(func, cudaFuncAttributePreferredSharedMemoryCarveout,
                               cudaSharedmemCarveoutMaxShared),
          "cudaFuncSetAttribute(PreferredSharedMemoryCarveout)");
  int n = 0;
  if (smem <= fi.max_dynamic_smem) {
    if (cluster == 0) {
      int per_sm = 0;
      check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, func, threads,
                                                          static_cast<size_t>(smem)),
            "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
      n = per_sm * di.sms;
    } else {
      cudaLaunchAttribute attr;
      const cudaLaunchConfig_t cfg = launch_config(dim3(static_cast<unsigned>(cluster)), threads,
                                                   smem, cluster, false, nullptr, attr);
      const cudaError_t err = cudaOccupancyMaxActiveClusters(&n, func, &cfg);
      if (err != cudaSuccess) {
        (void)cudaGetLastError();  // a refused cluster shape is an answer, not a failure
        n = 0;
      }
    }
  }
  if (restore)
    check(cudaFuncSetAttribute(func, cudaFuncAttributePreferredSharedMemoryCarveout, fi.carveout),
          "cudaFuncSetAttribute(PreferredSharedMemoryCarveout)");
  c.occupancy.emplace(key, n);
  return n;
}

// Before a row kernel launch: the smallest shared-memory carveout that holds the blocks per SM
// the launch was sized for (the rest of the 256 KB stays L1). Left to the driver, the carveout
// follows the application's cache preference: on the H100, 128 KB rows ran at 84% of copy in a
// 512-thread block with cudaFuncCachePreferShared (93-95% otherwise), and in clusters of 2 at 77%
// with cudaFuncCachePreferL1 (fewer resident blocks than the persistent grid was sized for).
// The attribute is set only when it changes; a concurrent launch of the same kernel with
// another shape may see the other value (a performance hint, never a correctness matter).
void set_carveout(const DeviceInfo& di, const void* func, int blocks_per_sm, std::int64_t smem,
                  bool clustered) {
  std::lock_guard<std::mutex> lock(cache().mu);
  FuncInfo& fi = func_info_locked(di, func, clustered);
  if (di.smem_per_sm <= 0) return;
  const std::int64_t need =
      static_cast<std::int64_t>(blocks_per_sm) * (smem + fi.static_smem + di.smem_reserved);
  const std::int64_t pct_up = (100 * need + di.smem_per_sm - 1) / di.smem_per_sm;  // rounded up
  const int pct = static_cast<int>(std::min<std::int64_t>(100, std::max<std::int64_t>(0, pct_up)));
  if (pct == fi.carveout) return;
  check(cudaFuncSetAttribute(func, cudaFuncAttributePreferredSharedMemoryCarveout, pct),
        "cudaFuncSetAttribute(PreferredSharedMemoryCarveout)");
  fi.carveout = pct;
}

namespace {

void launch(const void* func, dim3 grid, int threads, std::int64_t smem, int cluster, void* args,
            cudaStream_t stream, const char* what, bool cooperative = false) {
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t cfg =
      launch_config(grid, threads, smem, cluster > 1 ? cluster : 0, cooperative, stream, attr);
  void* argv[1] = {args};
  // The launch's own status: a cudaGetLastError() here would report an earlier call's error.
  check(cudaLaunchKernelExC(&cfg, func, argv), what);
}

template <class T>
constexpr int vec_width() {
  return 16 / static_cast<int>(sizeof(T));
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

int next_pow2(std::int64_t v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

int row_group_threads(const Plan& plan) {
  return plan.row_threads > 0 ? plan.row_threads : plan.threads;
}

template <class T>
const void* row_func(const Plan& plan, int kr) {
  if (plan.grid_join) {
    if (plan.row_threads != 0 && plan.row_threads != plan.threads) return nullptr;
    return group_row_kernel<T>(plan.vec, plan.threads, kr);
  }
  if (plan.cluster > 1) {
    if (plan.row_threads != 0 && plan.row_threads != plan.threads) return nullptr;
    return cluster_row_kernel<T>(plan.vec, plan.threads, kr);
  }
  return block_row_kernel<T>(plan.vec, plan.threads, row_group_threads(plan), kr);
}

// Fills ks/kr (and threads) for a row plan with the given cluster size; false if it cannot
// hold the row or cannot be resident.
template <class T>
std::int64_t row_smem_bytes(const Plan& plan, int lookahead) {
  const RowSlots rs = row_slots(plan.ks, plan.threads, lookahead);
  return static_cast<std::int64_t>(rs.nphys) * rs.gs * plan.threads * plan.vec *
         static_cast<std::int64_t>(sizeof(T));
}

// Resident row groups (blocks, clusters or grid groups) of a row plan with the given lookahead
// (0 if it does not fit).
template <class T>
int row_resident(const DeviceInfo& di, const Plan& plan, const void* f, int lookahead) {
  const std::int64_t smem = row_smem_bytes<T>(plan, lookahead);
  if (plan.grid_join) return max_active(di, f, plan.threads, smem, 0) / plan.cluster;
  return max_active(di, f, plan.threads, smem, plan.cluster > 1 ? plan.cluster : 0);
}

// Lookahead only for the register-extended kernel (rows beyond the shared memory of 16 blocks),
// and only where it costs no residency: measured on the H100 it helped there (1M-column rows,
// 65.5% -> 69.9% of copy) and nowhere else (92% -> 88% on 192 KB rows).
template <class T>
int resolve_lookahead(const DeviceInfo& di, const Plan& plan, const void* f) {
  if (plan.lookahead >= 0) return plan.lookahead;
  if (plan.kr == 0 || plan.cluster == 1) return 0;
  const int without = row_resident<T>(di, plan, f, 0);
  return (without > 0 && row_resident<T>(di, plan, f, 1) >= without) ? 1 : 0;
}

template <class T>
bool fit_row(const DeviceInfo& di, std::int64_t cols, Plan& plan) {
  const int V = plan.vec;
  const std::int64_t nvec = cols / V;
  if (plan.grid_join ? !di.cooperative : (plan.cluster > 1 && !di.clusters)) return false;
  const int gt = row_group_threads(plan);
  const std::int64_t pbv = ceil_div(nvec, plan.cluster);  // vectors per block (per row)
  const std::int64_t k = ceil_div(pbv, gt);              // vectors per thread
  if (k > (1 << 20)) return false;
  // Grid groups are sized for two blocks per SM: registers first take what shared memory can't.
  const int kr_order[2][2] = {{0, kRowRegisterVectors}, {kRowRegisterVectors, 0}};
  for (int kr : kr_order[plan.grid_join ? 1 : 0]) {
    const void* f = row_func<T>(plan, kr);
    if (f == nullptr) continue;
    Plan cand = plan;
    cand.kr = kr;
    cand.ks = static_cast<int>(std::max<std::int64_t>(0, k - kr));
    if (kr > 0 && k <= kr) continue;  // the plain kernel holds it
    cand.lookahead = resolve_lookahead<T>(di, cand, f);
    if (row_resident<T>(di, cand, f, cand.lookahead) > 0) {
      plan = cand;
      return true;
    }
  }
  return false;
}

// Shape of a stream plan: vectors per thread and chunk, chunks per row, blocks; false if the
// row has more chunks than the lead allows (the waits could deadlock) or the grid cannot be
// resident.
template <class T>
struct StreamShape {
  int kpt = 0;
  std::int64_t nchunks = 0, blocks = 0, smem = 0;
  const void* f = nullptr;
};

template <class T>
bool stream_shape(const DeviceInfo& di, const Plan& plan, std::int64_t cols, StreamShape<T>& sh) {
  if (!di.cooperative) return false;
  sh.f = stream_kernel<T>(plan.vec, plan.threads, plan.buffers, plan.lead);
  if (sh.f == nullptr || plan.chunk <= 0 || plan.chunk % plan.vec != 0) return false;
  sh.kpt = static_cast<int>(ceil_div(plan.chunk / plan.vec, plan.threads));
  const std::int64_t chunk = static_cast<std::int64_t>(sh.kpt) * plan.threads * plan.vec;
  sh.nchunks = ceil_div(cols, chunk);
  sh.smem = plan.buffers * chunk * static_cast<std::int64_t>(sizeof(T));
  const std::int64_t resident = max_active(di, sh.f, plan.threads + 32, sh.smem, 0);  // + the control warp
  sh.blocks = plan.grid > 0 ? std::min<std::int64_t>(plan.grid, resident) : resident;
  // a row spans at most lead - 1 steps of the grid (+1 chunk): its partials are all published
  // one step before any block waits for them
  return sh.blocks > 0 && sh.nchunks <= (plan.lead - 1) * sh.blocks + 1;
}

// The chunk-stream plan for the row (kStream* in softmax_plan.hpp); false if none can run.
template <class T>
bool choose_stream(const DeviceInfo& di, std::int64_t cols, Plan& plan) {
  Plan cand = plan;
  cand.regime = Regime::stream;
  cand.threads = kStreamThreads;
  cand.buffers = 4;
  cand.lead = 2;
  cand.chunk = kStreamShortChunkBytes / static_cast<std::int64_t>(sizeof(T));
  StreamShape<T> sh;
  const bool fits = stream_shape<T>(di, cand, cols, sh);
  if (sh.blocks <= 0) return false;  // no resident grid (or no cooperative launch)
  // Whole rows per step: the largest multiple of the row's chunks that the resident blocks hold,
  // if it keeps kStreamAlignedMinShare of them busy.
  const std::int64_t aligned = sh.blocks / sh.nchunks * sh.nchunks;
  if (fits && aligned * 100 >= kStreamAlignedMinShare * sh.blocks) {
    cand.grid = aligned;
  } else if (!fits || sh.nchunks > kStreamShortRowChunks) {
    cand.buffers = 5;
    cand.lead = 3;
    cand.chunk = kStreamLongChunkBytes / static_cast<std::int64_t>(sizeof(T));
  }
  if (!stream_shape<T>(di, cand, cols, sh)) return false;
  plan = cand;
  return true;
}

// The row regime, by the thresholds of softmax_plan.hpp. If a choice cannot hold the row or be
// resident: larger clusters, then smaller ones, then one block.
template <class T>
bool choose_row(const DeviceInfo& di, std::int64_t cols, Plan& plan, bool stream) {
  const std::int64_t es = static_cast<std::int64_t>(sizeof(T));
  const int cmax = di.clusters ? 16 : 1;
  const std::int64_t row_bytes = cols * es;
  auto attempt = [&](int cluster, int threads, int row_threads, bool grid_join = false) {
    Plan cand = plan;
    cand.regime = Regime::row;
    cand.cluster = cluster;
    cand.grid_join = grid_join;
    cand.threads = threads;
    cand.row_threads = row_threads;
    cand.lookahead = -1;
    // One block (warp-row: one block of four rows) per row group, replaced by the hardware as
    // blocks finish; clusters stay persistent. Measured on the H100 (NOTES.md): 91 -> 99% of
    // copy for 32-64 KB rows (a block per row) and 91-93 -> 99% for 8-16 KB rows (a warp per
    // row), while non-persistent clusters of 16 fell from 91% to 76%.
    cand.persistent = cluster > 1;
    if (!fit_row<T>(di, cols, cand)) return false;
    plan = cand;
    return true;
  };
  if (row_bytes <= kWarpRowMaxBytes && attempt(1, 128, 32)) return true;
  if (row_bytes <= kRowNarrowBlockBytes && attempt(1, 128, 0)) return true;
  if (row_bytes <= kRowTargetBlockBytes &&
      attempt(1, row_bytes > kRowWideBlockBytes ? 512 : 256, 0))
    return true;
  // Rows past kRowSingleBlockMinBytes that one SM holds: one 512-thread block per row, measured
  // at 97% of copy on 192 KB rows against 92-94% in clusters of 2 (at 128 KB the two were even).
  if (row_bytes > kRowSingleBlockMinBytes && attempt(1, 512, 0)) return true;
  // Longer rows: a chunk stream (vector rows); where it cannot hold the row (on a GPU with few
  // multiprocessors), grid groups and clusters. Measured on the H100 against the plans it
  // replaced: 256 KB - 6 MB rows 89.6-98.1% of copy against 38-91% (clusters of 2 to 16, grid
  // groups, split); 128 KB rows 92.1% against 93.8% for clusters of 2, which keep 64-128 KB.
  if (stream && plan.vec > 1 && row_bytes > kRowSingleBlockMinBytes && choose_stream<T>(di, cols, plan))
    return true;
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
    const int threads =
        block_bytes > (order[i] > 1 ? kRowClusterWideBytes : kRowWideBlockBytes) ? 512 : 256;
    if (attempt(order[i], threads, 0)) return true;
  }
  return false;
}

// use(ws) with `bytes` of the library's pool memory, allocated and freed on `stream` (freed also
// when use throws); `what` names the free in an error.
template <class F>
void with_workspace(const DeviceInfo& di, std::size_t bytes, cudaStream_t stream, const char* what, F&& use) {
  void* ws = workspace_alloc(di.device, bytes, stream);
  try {
    use(ws);
  } catch (...) {
    (void)cudaFreeAsync(ws, stream);
    throw;
  }
  check(cudaFreeAsync(ws, stream), what);
}

// The chunk streams' partial slots outside graph capture: one buffer per device, kept across calls
// and zeroed only when (re)allocated; each call tags its words with the next epoch, so words of
// earlier calls never match and no per-call memset is needed (4.5 us of 0.399 ms on 128 x 1M,
// H100). Calls that use the slots are ordered by `last`, also across streams. Never freed: it
// lives as long as the library's pool.
struct StreamSlots {
  std::mutex mu;
  unsigned long long* parts = nullptr;
  std::size_t bytes = 0;
  unsigned epoch = 0;  // of the last call
  cudaEvent_t last = nullptr;
};

StreamSlots& stream_slots(int device) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<StreamSlots>> slots;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<StreamSlots>& s = slots[device];
  if (!s) {
    auto fresh = std::make_unique<StreamSlots>();
    check(cudaEventCreateWithFlags(&fresh->last, cudaEventDisableTiming), "cudaEventCreate (stream slots)");
    s = std::move(fresh);
  }
  return *s;
}

template <class T>
void run_warp(const DeviceInfo& di, const Plan& plan, const Problem<T>& p, cudaStream_t stream) {
  const void* f = warp_kernel<T>(plan.vec, plan.group, plan.chunks);
  if (f == nullptr) throw_invalid("no warp kernel for " + describe(plan));
  if (static_cast<std::int64_t>(plan.group) * plan.chunks * plan.vec < p.cols)
    throw_invalid("warp plan too small for the row: " + describe(plan));
  // One row (group of rows) per warp, blocks replaced by the hardware as they finish, up to
  // 32 waves; plan.grid caps the blocks (a persistent grid when set to the resident count).
  const std::int64_t rows_per_block = (kWarpBlockThreads / 32) * (32 / plan.group);
  std::int64_t grid = ceil_div(p.rows, rows_per_block);
  const std::int64_t cap =
      plan.grid > 0 ? plan.grid : 32 * static_cast<std::int64_t>(max_active(di, f, kWarpBlockThreads, 0, 0));
  grid = std::max<std::int64_t>(1, std::min({grid, cap, std::int64_t(0x7fffffff)}));
  WarpArgs<T> a{p.x, p.y, p.ldx, p.ldy, p.rows, p.cols};
  launch(f, dim3(static_cast<unsigned>(grid)), kWarpBlockThreads, 0, 0, &a, stream,
         "warp kernel launch");
}

template <class T>
void run_row(const DeviceInfo& di, const Plan& plan, const Problem<T>& p, cudaStream_t stream) {
  const int V = plan.vec;
  if (plan.grid_join) {
    if (plan.cluster < 2 || plan.cluster > kRowGroupMaxBlocks)
      throw_invalid("grid groups hold a row in 2 to 32 blocks: " + describe(plan));
    if (!di.cooperative) throw_invalid("cooperative launch is not available on this device");
  } else if (plan.cluster < 1 || plan.cluster > 16 || (plan.cluster & (plan.cluster - 1)) != 0) {
    throw_invalid("cluster size must be 1, 2, 4, 8 or 16: " + describe(plan));
  } else if (plan.cluster > 1 && !di.clusters) {
    throw_invalid("thread-block clusters are not available on this device");
  }
  const void* f = row_func<T>(plan, plan.kr);
  if (f == nullptr) throw_invalid("no row kernel for " + describe(plan));
  const int gt = row_group_threads(plan);
  const std::int64_t ng = plan.threads / gt;  // rows in flight per block
  const std::int64_t per_thread = plan.ks + plan.kr;
  if (per_thread * gt * plan.cluster * V < p.cols)
    throw_invalid("row plan too small for the row: " + describe(plan));
  const int lookahead = resolve_lookahead<T>(di, plan, f);
  const std::int64_t smem = row_smem_bytes<T>(plan, lookahead);
  const int resident = row_resident<T>(di, plan, f, lookahead);
  if (resident <= 0) throw_invalid("row plan cannot be resident: " + describe(plan));
  // groups: blocks (clusters) launched; each keeps ng rows in flight
  std::int64_t groups = ceil_div(p.rows, ng);
  if (plan.grid > 0) groups = std::min(groups, ceil_div(plan.grid, ng));
  // a cooperative grid is resident at once (its groups wait on each other's blocks)
  if (plan.persistent || plan.grid_join) groups = std::min<std::int64_t>(groups, resident);
  groups = std::max<std::int64_t>(1, std::min<std::int64_t>(groups, 0x7fffffffLL / plan.cluster));
  // blocks per SM the residency query allowed (clusters: spread over the SMs, rounded up)
  const int bps = static_cast<int>(ceil_div(static_cast<std::int64_t>(resident) * plan.cluster, di.sms));
  set_carveout(di, f, bps, smem, plan.cluster > 1 && !plan.grid_join);
  RowArgs<T> a{p.x, p.y, p.ldx, p.ldy, p.rows, p.cols, plan.ks, lookahead, 0, nullptr, nullptr};
  const dim3 grid(static_cast<unsigned>(groups * plan.cluster));
  if (!plan.grid_join) {
    launch(f, grid, plan.threads, smem, plan.cluster, &a, stream,
           plan.cluster > 1 ? "cluster kernel launch" : "block kernel launch");
    return;
  }
  // Grid groups: a partial and a zeroed flag per row and block.
  const std::int64_t slots = p.rows * plan.cluster;
  const std::size_t parts_bytes = static_cast<std::size_t>(slots) * sizeof(MS<T>);
  const std::size_t flags_bytes = static_cast<std::size_t>(slots) * sizeof(unsigned);
  with_workspace(di, parts_bytes + flags_bytes, stream, "cudaFreeAsync (group workspace)", [&](void* ws) {
    a.group = plan.cluster;
    a.xparts = static_cast<MS<T>*>(ws);
    a.xflags = reinterpret_cast<unsigned*>(static_cast<unsigned char*>(ws) + parts_bytes);
    check(cudaMemsetAsync(a.xflags, 0, flags_bytes, stream), "cudaMemsetAsync (group flags)");
    launch(f, grid, plan.threads, smem, 0, &a, stream, "group kernel launch", true);
  });
}

template <class T>
void run_stream(const DeviceInfo& di, const Plan& plan, const Problem<T>& p, cudaStream_t stream) {
  StreamShape<T> sh;
  if (!stream_shape<T>(di, plan, p.cols, sh))
    throw_invalid("stream plan cannot hold this row on the resident blocks: " + describe(plan));
  const std::int64_t blocks = std::min(sh.blocks, p.rows * sh.nchunks);
  set_carveout(di, sh.f, static_cast<int>(ceil_div(sh.blocks, di.sms)), sh.smem, false);
  const std::size_t parts_bytes =
      static_cast<std::size_t>(p.rows * sh.nchunks) * kStreamSlotWords * sizeof(unsigned long long);
  StreamArgs<T> a{p.x, p.y, p.ldx, p.ldy, p.rows, p.cols, sh.kpt, sh.nchunks, nullptr, 1};
  const auto run = [&] {
    launch(sh.f, dim3(static_cast<unsigned>(blocks)), plan.threads + 32, sh.smem, 0, &a, stream,
           "stream kernel launch", true);
  };
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
  if (capture != cudaStreamCaptureStatusNone) {  // a graph replays one epoch: zeroed slots per call
    with_workspace(di, parts_bytes, stream, "cudaFreeAsync (stream workspace)", [&](void* ws) {
      a.parts = static_cast<unsigned long long*>(ws);
      check(cudaMemsetAsync(a.parts, 0, parts_bytes, stream), "cudaMemsetAsync (stream partials)");
      run();
    });
    return;
  }
  StreamSlots& slots = stream_slots(di.device);
  std::lock_guard<std::mutex> lock(slots.mu);
  // after the previous call that used the slots, on whichever stream it ran
  check(cudaStreamWaitEvent(stream, slots.last, 0), "cudaStreamWaitEvent (stream slots)");
  if (slots.bytes < parts_bytes || slots.epoch == std::numeric_limits<unsigned>::max()) {
    if (slots.parts != nullptr) check(cudaFreeAsync(slots.parts, stream), "cudaFreeAsync (stream slots)");
    slots.parts = nullptr;
    slots.bytes = 0;
    void* fresh = workspace_alloc(di.device, parts_bytes, stream);
    const cudaError_t err = cudaMemsetAsync(fresh, 0, parts_bytes, stream);
    if (err != cudaSuccess) {
      (void)cudaFreeAsync(fresh, stream);
      throw_cuda(err, "cudaMemsetAsync (stream slots)");
    }
    slots.parts = static_cast<unsigned long long*>(fresh);
    slots.bytes = parts_bytes;
    slots.epoch = 0;
  }
  a.parts = slots.parts;
  a.epoch = ++slots.epoch;
  run();
  check(cudaEventRecord(slots.last, stream), "cudaEventRecord (stream slots)");
}

template <class T>
void run_split(const DeviceInfo& di, const Plan& plan, const Problem<T>& p, cudaStream_t stream) {
  const int V = plan.vec;
  const std::int64_t es = static_cast<std::int64_t>(sizeof(T));
  const std::int64_t chunk = plan.chunk > 0 ? plan.chunk : kSplitChunkBytes / es;
  if (chunk % V != 0) throw_invalid("split chunk must be a multiple of the vector width");
  const void* f1 = split_partial_kernel<T>(V);
  const void* fc = split_combine_kernel<T>();
  const void* f2 = split_write_kernel<T>(V);
  if (f1 == nullptr || f2 == nullptr) throw_invalid("no split kernel for " + describe(plan));
  const std::int64_t nchunks = ceil_div(p.cols, chunk);
  if (nchunks > 0x7fffffffLL) throw_invalid("row too long");
  // Rows per pass pair: what pass 2 re-reads (and what it writes) should stay in L2.
  std::int64_t group = plan.group_rows;
  if (group <= 0) group = std::max<std::int64_t>(1, (di.l2_bytes / 3) / std::max<std::int64_t>(1, p.cols * es));
  group = std::min<std::int64_t>({group, p.rows, 65535});
  const bool combine = nchunks > 256;
  const std::int64_t nparts = group * nchunks;
  const std::size_t ws_bytes =
      static_cast<std::size_t>(nparts + (combine ? group : 0)) * sizeof(MS<T>);
  with_workspace(di, ws_bytes, stream, "cudaFreeAsync (split workspace)", [&](void* ws) {
    MS<T>* parts = static_cast<MS<T>*>(ws);
    MS<T>* tot = combine ? parts + nparts : nullptr;
    for (std::int64_t r0 = 0; r0 < p.rows; r0 += group) {
      const std::int64_t nr = std::min(group, p.rows - r0);
      SplitArgs<T> a{p.x, p.y, p.ldx, p.ldy, r0, p.cols, chunk, nchunks, parts, tot,
                     combine ? 1 : nchunks};
      const dim3 grid(static_cast<unsigned>(nchunks), static_cast<unsigned>(nr));
      launch(f1, grid, kSplitThreads, 0, 0, &a, stream, "split partial launch");
      if (combine)
        launch(fc, dim3(static_cast<unsigned>(nr)), kSplitThreads, 0, 0, &a, stream,
               "split combine launch");
      launch(f2, grid, kSplitThreads, 0, 0, &a, stream, "split write launch");
    }
  });
}

template <class T>
void validate(const Problem<T>& p) {
  if (p.rows < 0 || p.cols < 0)
    throw_invalid("rows and cols must be >= 0 (rows " + std::to_string(p.rows) + ", cols " +
                  std::to_string(p.cols) + ")");
  if (p.ldx < p.cols || p.ldy < p.cols)
    throw_invalid("ldx and ldy must be >= cols (ldx " + std::to_string(p.ldx) + ", ldy " +
                  std::to_string(p.ldy) + ", cols " + std::to_string(p.cols) + ")");
  if (p.rows > 0 && p.cols > 0 && (p.x == nullptr || p.y == nullptr))
    throw_invalid("null pointer for a non-empty matrix");
}

template <class T>
void softmax_impl(const T* x, std::int64_t ldx, T* y, std::int64_t ldy, std::int64_t rows,
                  std::int64_t cols, cudaStream_t stream) {
  const Problem<T> p{x, ldx, y, ldy, rows, cols};
  validate(p);
  if (rows == 0 || cols == 0) return;
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  const DeviceInfo& di = device_info(dev);
  if (!di.available)
    throw_cuda(cudaErrorNoKernelImageForDevice, "no usable kernel image for the current device");
  run_plan(di, make_plan(di, p), p, stream);
}

}  // namespace

[[noreturn]] void throw_cuda(cudaError_t err, const char* what) {
  (void)cudaGetLastError();  // the failed call's error is reported here, never again by a later call
  throw std::runtime_error(std::string(kPrefix) + what + ": " + cudaGetErrorName(err) + ": " +
                           cudaGetErrorString(err));
}

// Stream-ordered scratch memory from the library's own pool on the device: unlike the default
// pool (release threshold 0) it keeps its memory across synchronizations, so a caller that
// synchronizes after every call does not pay a fresh mapping per call. The workspaces are small
// (per-row or per-chunk partials: well under 1% of the matrix; the fused layers' per-feature
// vectors and 3xTF32 operand splits).
void* workspace_alloc(int device, std::size_t bytes, cudaStream_t stream) {
  cudaMemPool_t pool = nullptr;
  {
    std::lock_guard<std::mutex> lock(cache().mu);
    auto it = cache().pools.find(device);
    if (it == cache().pools.end()) {
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = device;
      check(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate (workspace)");
      std::uint64_t keep = ~std::uint64_t(0);
      check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
            "cudaMemPoolSetAttribute (workspace)");
      it = cache().pools.emplace(device, pool).first;
    }
    pool = it->second;
  }
  void* p = nullptr;
  check(cudaMallocFromPoolAsync(&p, bytes, pool, stream), "cudaMallocFromPoolAsync (workspace)");
  return p;
}

const DeviceInfo& device_info(int device) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.devices.find(device);
  if (it != c.devices.end()) return it->second;
  DeviceInfo di;
  di.device = device;
  int major = 0, minor = 0, cl = 0, coop = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "device query");
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "device query");
  check(cudaDeviceGetAttribute(&di.sms, cudaDevAttrMultiProcessorCount, device), "device query");
  check(cudaDeviceGetAttribute(&di.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
        "device query");
  check(cudaDeviceGetAttribute(&di.l2_bytes, cudaDevAttrL2CacheSize, device), "device query");
  check(cudaDeviceGetAttribute(&di.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device),
        "device query");
  check(cudaDeviceGetAttribute(&di.smem_reserved, cudaDevAttrReservedSharedMemoryPerBlock, device),
        "device query");
  if (cudaDeviceGetAttribute(&cl, cudaDevAttrClusterLaunch, device) != cudaSuccess) {
    (void)cudaGetLastError();
    cl = 0;
  }
  check(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device), "device query");
  di.cc = 10 * major + minor;
  // Which machine code loads here: ask the runtime about one kernel on that device.
  int cur = 0;
  check(cudaGetDevice(&cur), "cudaGetDevice");
  if (cur != device) check(cudaSetDevice(device), "cudaSetDevice");
  cudaFuncAttributes attr{};
  const cudaError_t err = cudaFuncGetAttributes(&attr, cluster_row_kernel<float>(4, 512, 0));
  if (cur != device) (void)cudaSetDevice(cur);
  if (err == cudaSuccess) {
    di.binary_version = attr.binaryVersion;
    di.available = di.cc >= 80;
  } else {
    (void)cudaGetLastError();
    di.available = false;
  }
  di.clusters = di.available && cl != 0 && di.binary_version >= 90;
  di.cooperative = di.available && coop != 0;
  return c.devices.emplace(device, di).first->second;
}

template <class T>
bool vector_ok(const Problem<T>& p) {
  const int V = vec_width<T>();
  const auto aligned = [](const void* q) { return (reinterpret_cast<std::uintptr_t>(q) & 15u) == 0; };
  return p.cols % V == 0 && p.ldx % V == 0 && p.ldy % V == 0 && aligned(p.x) && aligned(p.y);
}

template <class T>
Plan make_plan(const DeviceInfo& di, const Problem<T>& p, bool stream) {
  Plan plan;
  plan.vec = vector_ok(p) ? vec_width<T>() : 1;
  const std::int64_t es = static_cast<std::int64_t>(sizeof(T));
  if (p.cols * es <= kWarpMaxRowBytes) {
    plan.regime = Regime::warp;
    const std::int64_t nvec = ceil_div(p.cols, plan.vec);
    if (nvec <= 16) {
      plan.group = next_pow2(nvec);
      plan.chunks = 1;
    } else {
      plan.group = 32;
      const std::int64_t per_lane = ceil_div(nvec, 32);
      plan.chunks = plan.vec > 1 ? static_cast<int>(per_lane) : next_pow2(per_lane);
    }
    return plan;
  }
  if (choose_row<T>(di, p.cols, plan, stream)) return plan;
  plan.regime = Regime::split;
  plan.chunk = kSplitChunkBytes / es;
  return plan;
}

template <class T>
void run_plan(const DeviceInfo& di, const Plan& plan, const Problem<T>& p, cudaStream_t stream) {
  validate(p);
  if (p.rows == 0 || p.cols == 0) return;
  if (plan.vec != 1 && (plan.vec != vec_width<T>() || !vector_ok(p)))
    throw_invalid("vector width " + std::to_string(plan.vec) + " not possible for this problem");
  switch (plan.regime) {
    case Regime::warp: run_warp(di, plan, p, stream); break;
    case Regime::row: run_row(di, plan, p, stream); break;
    case Regime::stream: run_stream(di, plan, p, stream); break;
    case Regime::split: run_split(di, plan, p, stream); break;
  }
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
    const std::int64_t mid = lo + (hi - lo) / 2;
    (onchip(mid * V) ? lo : hi) = mid;
  }
  return lo * V;
}

std::string describe(const Plan& plan) {
  char buf[160];
  switch (plan.regime) {
    case Regime::warp:
      std::snprintf(buf, sizeof(buf), "warp vec=%d group=%d chunks=%d", plan.vec, plan.group,
                    plan.chunks);
      break;
    case Regime::row:
      std::snprintf(buf, sizeof(buf), "%s vec=%d cluster=%d threads=%d ks=%d kr=%d la=%d",
                    plan.grid_join ? "group"
                    : plan.cluster > 1 ? "cluster"
                                       : (plan.row_threads == 32 ? "warprow" : "block"),
                    plan.vec, plan.cluster, plan.threads, plan.ks, plan.kr, plan.lookahead);
      break;
    case Regime::stream:
      std::snprintf(buf, sizeof(buf), "stream vec=%d threads=%d chunk=%lld buffers=%d lead=%d", plan.vec,
                    plan.threads, static_cast<long long>(plan.chunk), plan.buffers, plan.lead);
      break;
    case Regime::split:
      std::snprintf(buf, sizeof(buf), "split vec=%d chunk=%lld group_rows=%lld", plan.vec,
                    static_cast<long long>(plan.chunk), static_cast<long long>(plan.group_rows));
      break;
  }
  std::string s(buf);
  if (plan.grid > 0) s += " grid=" + std::to_string(plan.grid);
  if (plan.regime == Regime::row && !plan.persistent) s += " nonpersistent";
  return s;
}

template bool vector_ok<float>(const Problem<float>&);
template bool vector_ok<double>(const Problem<double>&);
template Plan make_plan<float>(const DeviceInfo&, const Problem<float>&, bool);
template Plan make_plan<double>(const DeviceInfo&, const Problem<double>&, bool);
template void run_plan<float>(const DeviceInfo&, const Plan&, const Problem<float>&, cudaStream_t);
template void run_plan<double>(const DeviceInfo&, const Plan&, const Problem<double>&,
                               cudaStream_t);
template std::int64_t onchip_max_cols<float>(const DeviceInfo&, bool);
template std::int64_t onchip_max_cols<double>(const DeviceInfo&, bool);

}  // namespace impl

bool softmax_available(int device) {
  try {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    if (device < 0 || device >= n) return false;
    return impl::device_info(device).available;
  } catch (...) {
    (void)cudaGetLastError();
    return false;
  }
}

void softmax(const float* x, std::int64_t ldx, float* y, std::int64_t ldy, std::int64_t rows,
             std::int64_t cols, cudaStream_t stream) {
  impl::softmax_impl(x, ldx, y, ldy, rows, cols, stream);
}

void softmax(const double* x, std::int64_t ldx, double* y, std::int64_t ldy, std::int64_t rows,
             std::int64_t cols, cudaStream_t stream) {
  impl::softmax_impl(x, ldx, y, ldy, rows, cols, stream);
}

}  // namespace cuda_specialized
}  // namespace softfuse
