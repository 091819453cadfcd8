// The launches of softmax plans: one launcher per regime (warp, row, chunk stream, split), their
// workspaces and the chunk streams' persistent slots.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <cuda_runtime.h>

#include "runtime.hpp"
#include "softmax_kernels.hpp"
#include "softmax_launch.hpp"
#include "softmax_plan.hpp"
#include "softmax_shape.hpp"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

namespace {

// dependent: a programmatic dependent launch (runtime.hpp) of the kernel before it in the stream; for launches with
// no other attribute.
void launch(const void* func, dim3 grid, int threads, std::int64_t smem, int cluster, void* args, cudaStream_t stream,
            const char* what, bool cooperative = false, bool dependent = false) {
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t cfg = launch_config(grid, threads, smem, cluster > 1 ? cluster : 0, cooperative, stream, attr);
  if (dependent) {
    if (cfg.numAttrs != 0) throw_invalid(std::string(what) + ": a dependent launch with another attribute");
    attr         = dependent_launch_attribute();
    cfg.attrs    = &attr;
    cfg.numAttrs = 1;
  }
  void* argv[1] = {args};
  // The launch's own status: a cudaGetLastError() here would report an earlier call's error.
  check(cudaLaunchKernelExC(&cfg, func, argv), what);
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
  std::size_t bytes         = 0;
  unsigned epoch            = 0;  // of the last call
  cudaEvent_t last          = nullptr;
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

// Kernels without dynamic shared memory (warp and split): the smallest carveout for their `resident` blocks
// (max_active), the rest L1. Left to the driver it follows the device's cache preference, and Kokkos::initialize sets
// cudaFuncCachePreferShared device-wide.
void prefer_l1(const DeviceInfo& di, const void* f, int resident) {
  set_carveout(di, f, static_cast<int>(ceil_div(resident, di.sms)), 0, false);
}

// Rows of up to 256 bytes whose pitch divides x's distance past a 256-byte boundary (a Kokkos View starts 128 bytes
// past one): start the steps that many rows early, so that each warp's loads cover whole 256-byte blocks.
template <class T>
std::int64_t warp_skew(const Plan& plan, const Problem<T>& p) {
  if (plan.skew >= 0) return plan.skew;
  const std::int64_t pitch = p.ldx * static_cast<std::int64_t>(sizeof(T));
  const std::int64_t off   = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(p.x) % 256);
  if (plan.group >= 32 || pitch > 256 || 256 % pitch != 0 || off % pitch != 0) return 0;
  return off / pitch;
}

template <class T>
void run_warp(const DeviceInfo& di, const Plan& plan, const Problem<T>& p, cudaStream_t stream) {
  const void* f = warp_kernel<T>(plan.vec, plan.group, plan.chunks, plan.batch);
  if (f == nullptr) throw_invalid("no warp kernel for " + describe(plan));
  if (static_cast<std::int64_t>(plan.group) * plan.chunks * plan.vec < p.cols)
    throw_invalid("warp plan too small for the row: " + describe(plan));
  // One row (group of rows) per warp, blocks replaced by the hardware as they finish, up to
  // 32 waves; plan.grid caps the blocks (a persistent grid when set to the resident count).
  const std::int64_t rows_per_block = kWarpBlockThreads / plan.group * plan.batch;
  const std::int64_t skew           = warp_skew(plan, p);
  std::int64_t grid                 = ceil_div(p.rows + skew, rows_per_block);
  const int resident                = max_active(di, f, kWarpBlockThreads, 0, 0);
  const std::int64_t cap            = plan.grid > 0 ? plan.grid : 32 * static_cast<std::int64_t>(resident);
  grid                              = std::max<std::int64_t>(1, std::min({grid, cap, std::int64_t(0x7fffffff)}));
  prefer_l1(di, f, resident);
  WarpArgs<T> a{p.x, p.y, p.ldx, p.ldy, p.rows, p.cols, skew};
  launch(f, dim3(static_cast<unsigned>(grid)), kWarpBlockThreads, 0, 0, &a, stream, "warp kernel launch");
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
  const int gt                  = row_group_threads(plan);
  const std::int64_t ng         = plan.threads / gt;  // rows in flight per block
  const std::int64_t per_thread = plan.ks + plan.kr;
  if (per_thread * gt * plan.cluster * V < p.cols) throw_invalid("row plan too small for the row: " + describe(plan));
  const int lookahead     = resolve_lookahead<T>(di, plan, f);
  const std::int64_t smem = row_smem_bytes<T>(plan, lookahead);
  const int resident      = row_resident<T>(di, plan, f, lookahead);
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
  const std::int64_t slots      = p.rows * plan.cluster;
  const std::size_t parts_bytes = static_cast<std::size_t>(slots) * sizeof(MS<T>);
  const std::size_t flags_bytes = static_cast<std::size_t>(slots) * sizeof(unsigned);
  with_workspace(di, parts_bytes + flags_bytes, stream, "cudaFreeAsync (group workspace)", [&](void* ws) {
    a.group  = plan.cluster;
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
    launch(sh.f, dim3(static_cast<unsigned>(blocks)), plan.threads + 32, sh.smem, 0, &a, stream, "stream kernel launch",
           true);
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
    slots.parts           = nullptr;
    slots.bytes           = 0;
    void* fresh           = workspace_alloc(di.device, parts_bytes, stream);
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
  const int V              = plan.vec;
  const std::int64_t es    = static_cast<std::int64_t>(sizeof(T));
  const std::int64_t chunk = plan.chunk > 0 ? plan.chunk : kSplitChunkBytes / es;
  if (chunk % V != 0) throw_invalid("split chunk must be a multiple of the vector width");
  const void* f1 = split_partial_kernel<T>(V);
  const void* fc = split_combine_kernel<T>();
  const void* f2 = split_write_kernel<T>(V);
  if (f1 == nullptr || f2 == nullptr) throw_invalid("no split kernel for " + describe(plan));
  const std::int64_t nchunks = ceil_div(p.cols, chunk);
  if (nchunks > 0x7fffffffLL) throw_invalid("row too long");
  // Rows per pass pair (kSplitMinL2Rows in softmax_plan.hpp): groups that stay in L2 between the passes, or all rows.
  std::int64_t group = plan.group_rows;
  if (group <= 0) {
    const std::int64_t l2_rows = (di.l2_bytes / 3) / std::max<std::int64_t>(1, p.cols * es);
    group                      = l2_rows >= kSplitMinL2Rows ? l2_rows : p.rows;
  }
  group = std::min<std::int64_t>({group, p.rows, 65535, std::max<std::int64_t>(1, kSplitMaxPartials / nchunks)});
  const bool combine         = nchunks > 256;
  const std::int64_t nparts  = group * nchunks;
  const std::size_t ws_bytes = static_cast<std::size_t>(nparts + (combine ? group : 0)) * sizeof(MS<T>);
  for (const void* f : {f1, fc, f2})
    if (f != nullptr) prefer_l1(di, f, max_active(di, f, kSplitThreads, 0, 0));
  // each pass scheduled while the one before finishes (its kernels wait for it: sm_90 code only)
  const bool dependent = plan.dependent && di.binary_version >= 90;
  with_workspace(di, ws_bytes, stream, "cudaFreeAsync (split workspace)", [&](void* ws) {
    MS<T>* parts = static_cast<MS<T>*>(ws);
    MS<T>* tot   = combine ? parts + nparts : nullptr;
    for (std::int64_t r0 = 0; r0 < p.rows; r0 += group) {
      const std::int64_t nr = std::min(group, p.rows - r0);
      SplitArgs<T> a{p.x, p.y, p.ldx, p.ldy, r0, p.cols, chunk, nchunks, parts, tot, combine ? 1 : nchunks};
      const dim3 grid(static_cast<unsigned>(nchunks), static_cast<unsigned>(nr));
      launch(f1, grid, kSplitThreads, 0, 0, &a, stream, "split partial launch", false, dependent);
      if (combine)
        launch(fc, dim3(static_cast<unsigned>(nr)), kSplitThreads, 0, 0, &a, stream, "split combine launch", false,
               dependent);
      launch(f2, grid, kSplitThreads, 0, 0, &a, stream, "split write launch", false, dependent);
    }
  });
}
}  // namespace

template <class T>
void validate(const Problem<T>& p) {
  if (p.rows < 0 || p.cols < 0)
    throw_invalid("rows and cols must be >= 0 (rows " + std::to_string(p.rows) + ", cols " + std::to_string(p.cols) +
                  ")");
  if (p.ldx < p.cols || p.ldy < p.cols)
    throw_invalid("ldx and ldy must be >= cols (ldx " + std::to_string(p.ldx) + ", ldy " + std::to_string(p.ldy) +
                  ", cols " + std::to_string(p.cols) + ")");
  if (p.rows > 0 && p.cols > 0 && (p.x == nullptr || p.y == nullptr))
    throw_invalid("null pointer for a non-empty matrix");
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
template void validate<float>(const Problem<float>&);
template void validate<double>(const Problem<double>&);
template void run_plan<float>(const DeviceInfo&, const Plan&, const Problem<float>&, cudaStream_t);
template void run_plan<double>(const DeviceInfo&, const Plan&, const Problem<double>&, cudaStream_t);

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse
