// The CUDA runtime as the kernels of softmax and the fused layers use it: device properties (read once
// per device), kernel attributes, occupancy and shared-memory carveout (cached per kernel and launch
// shape), the library's memory pool, and the errors they throw. Thread-safe: one mutex guards the caches.
#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include <cuda_runtime.h>

#include "runtime.hpp"
#include "softmax_kernels.hpp"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

namespace {

constexpr const char* kPrefix       = "softfuse::cuda_specialized::softmax: ";
constexpr const char* kLinearPrefix = "softfuse::cuda_specialized::linear: ";

// Everything learnt from the runtime is cached here, under one mutex.
struct FuncInfo {
  int static_smem      = 0;
  int max_dynamic_smem = 0;  // what the attribute was raised to
  int binary_version   = 0;
  int carveout         = cudaSharedmemCarveoutDefault;  // the preferred carveout last set (percent)
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
  Cache& c       = cache();
  const auto key = std::make_pair(di.device, func);
  auto it        = c.funcs.find(key);
  if (it != c.funcs.end()) return it->second;
  cudaFuncAttributes attr{};
  check(cudaFuncGetAttributes(&attr, func), "cudaFuncGetAttributes");
  FuncInfo fi;
  fi.static_smem      = static_cast<int>(attr.sharedSizeBytes);
  fi.binary_version   = attr.binaryVersion;
  fi.max_dynamic_smem = std::max(0, di.smem_optin - fi.static_smem);
  check(cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, fi.max_dynamic_smem),
        "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  if (clustered) {
    check(cudaFuncSetAttribute(func, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
          "cudaFuncSetAttribute(NonPortableClusterSizeAllowed)");
  }
  return c.funcs.emplace(key, fi).first->second;
}

}  // namespace

cudaLaunchConfig_t launch_config(dim3 grid, int threads, std::int64_t smem, int cluster, bool cooperative,
                                 cudaStream_t stream, cudaLaunchAttribute& attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim          = grid;
  cfg.blockDim         = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream           = stream;
  if (cluster > 0) {
    attr.id               = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = static_cast<unsigned>(cluster);
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    cfg.attrs             = &attr;
    cfg.numAttrs          = 1;
  } else if (cooperative) {
    attr.id              = cudaLaunchAttributeCooperative;
    attr.val.cooperative = 1;
    cfg.attrs            = &attr;
    cfg.numAttrs         = 1;
  }
  return cfg;
}

[[noreturn]] void throw_invalid(const std::string& what) { throw std::invalid_argument(std::string(kPrefix) + what); }

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw_cuda(err, what);
}

[[noreturn]] void throw_cuda(cudaError_t err, const char* what) {
  (void)cudaGetLastError();  // the failed call's error is reported here, never again by a later call
  throw std::runtime_error(std::string(kPrefix) + what + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}
// Resident blocks (cluster == 0: plain launch) or resident clusters of `cluster` blocks.
// Cached: after the first call for a launch shape this is one uncontended lock and a map lookup.
int max_active(const DeviceInfo& di, const void* func, int threads, std::int64_t smem, int cluster) {
  std::lock_guard<std::mutex> lock(cache().mu);
  Cache& c       = cache();
  const auto key = std::make_tuple(di.device, func, threads, smem, cluster);
  auto it        = c.occupancy.find(key);
  if (it != c.occupancy.end()) return it->second;
  FuncInfo& fi = func_info_locked(di, func, cluster > 0);
  // Residency at the largest carveout, whatever preference the kernel or the device carries.
  const bool restore = fi.carveout != cudaSharedmemCarveoutMaxShared;
  if (restore)
    check(cudaFuncSetAttribute(func, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared),
          "cudaFuncSetAttribute(PreferredSharedMemoryCarveout)");
  int n = 0;
  if (smem <= fi.max_dynamic_smem) {
    if (cluster == 0) {
      int per_sm = 0;
      check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, func, threads, static_cast<size_t>(smem)),
            "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
      n = per_sm * di.sms;
    } else {
      cudaLaunchAttribute attr;
      const cudaLaunchConfig_t cfg =
          launch_config(dim3(static_cast<unsigned>(cluster)), threads, smem, cluster, false, nullptr, attr);
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
void set_carveout(const DeviceInfo& di, const void* func, int blocks_per_sm, std::int64_t smem, bool clustered) {
  std::lock_guard<std::mutex> lock(cache().mu);
  FuncInfo& fi = func_info_locked(di, func, clustered);
  if (di.smem_per_sm <= 0) return;
  const std::int64_t need   = static_cast<std::int64_t>(blocks_per_sm) * (smem + fi.static_smem + di.smem_reserved);
  const std::int64_t pct_up = (100 * need + di.smem_per_sm - 1) / di.smem_per_sm;  // rounded up
  const int pct             = static_cast<int>(std::min<std::int64_t>(100, std::max<std::int64_t>(0, pct_up)));
  if (pct == fi.carveout) return;
  check(cudaFuncSetAttribute(func, cudaFuncAttributePreferredSharedMemoryCarveout, pct),
        "cudaFuncSetAttribute(PreferredSharedMemoryCarveout)");
  fi.carveout = pct;
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
      props.allocType     = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id   = device;
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
  check(cudaDeviceGetAttribute(&di.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "device query");
  check(cudaDeviceGetAttribute(&di.l2_bytes, cudaDevAttrL2CacheSize, device), "device query");
  check(cudaDeviceGetAttribute(&di.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device), "device query");
  check(cudaDeviceGetAttribute(&di.smem_reserved, cudaDevAttrReservedSharedMemoryPerBlock, device), "device query");
  if (cudaDeviceGetAttribute(&cl, cudaDevAttrClusterLaunch, device) != cudaSuccess) {
    (void)cudaGetLastError();
    cl = 0;
  }
  check(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device), "device query");
  di.cc       = 10 * major + minor;
  int mem_khz = 0, bus_bits = 0;  // double data rate: two transfers per clock
  if (cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device) == cudaSuccess &&
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) == cudaSuccess)
    di.dram_bytes_per_s = 2.0 * mem_khz * 1e3 * bus_bits / 8;
  else
    (void)cudaGetLastError();
  // Which machine code loads here: ask the runtime about one kernel on that device.
  int cur = 0;
  check(cudaGetDevice(&cur), "cudaGetDevice");
  if (cur != device) check(cudaSetDevice(device), "cudaSetDevice");
  cudaFuncAttributes attr{};
  const cudaError_t err = cudaFuncGetAttributes(&attr, cluster_row_kernel<float>(4, 512, 0));
  if (cur != device) (void)cudaSetDevice(cur);
  if (err == cudaSuccess) {
    di.binary_version = attr.binaryVersion;
    di.available      = di.cc >= 80;
  } else {
    (void)cudaGetLastError();
    di.available = false;
  }
  di.clusters    = di.available && cl != 0 && di.binary_version >= 90;
  di.cooperative = di.available && coop != 0;
  return c.devices.emplace(device, di).first->second;
}
StreamBuffer::StreamBuffer(std::size_t bytes, cudaStream_t stream, const char* what) : stream_(stream) {
  if (bytes == 0) return;
  int device = 0;
  check_linear(cudaGetDevice(&device), "cudaGetDevice");
  try {
    p_ = workspace_alloc(device, bytes, stream);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(kLinearPrefix) + "cannot allocate " + std::to_string(bytes) +
                             " bytes for the " + what + " (" + e.what() + ")");
  }
}

StreamBuffer::~StreamBuffer() {
  if (p_) (void)cudaFreeAsync(p_, stream_);
}

[[noreturn]] void throw_linear_invalid(const std::string& what) {
  throw std::invalid_argument(std::string(kLinearPrefix) + what);
}

[[noreturn]] void throw_linear_cuda(cudaError_t err, const char* what) {
  (void)cudaGetLastError();  // the failed call's error is reported here, never again by a later call
  throw std::runtime_error(std::string(kLinearPrefix) + what + ": " + cudaGetErrorName(err) + ": " +
                           cudaGetErrorString(err));
}

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse
