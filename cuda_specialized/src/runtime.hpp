// Private: the CUDA runtime as the kernels of softmax and the fused layers use it (runtime.cu): device
// properties, occupancy and carveout of a kernel, launch attributes (dependent launches), the library's memory pool,
// and the errors thrown.
#ifndef SOFTFUSE_CUDA_SPECIALIZED_RUNTIME_HPP
#define SOFTFUSE_CUDA_SPECIALIZED_RUNTIME_HPP

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

namespace softfuse {
namespace cuda_specialized {
namespace impl {

// Read once per device (thread-safe), then kept.
struct DeviceInfo {
  int device              = -1;
  int cc                  = 0;  // 10*major + minor
  int sms                 = 0;
  int smem_optin          = 0;  // opt-in shared memory per block (bytes)
  int smem_per_sm         = 0;  // shared memory per SM at the largest carveout (bytes)
  int smem_reserved       = 0;  // shared memory the system reserves per block (bytes)
  int l2_bytes            = 0;
  double dram_bytes_per_s = 0;      // peak DRAM bandwidth: 2 x memory clock x bus width (0: not reported)
  int binary_version      = 0;      // of the loaded machine code (90 on Hopper, 80 on Ampere/Ada)
  bool clusters           = false;  // cluster launch supported and sm_90 code loaded
  bool cooperative        = false;  // cooperative launch supported (grid groups)
  bool available          = false;  // cc >= 8.0 and the kernels load
};

// Throws std::runtime_error("softfuse::cuda_specialized::softmax: <what>: <CUDA error>").
[[noreturn]] void throw_cuda(cudaError_t err, const char* what);

const DeviceInfo& device_info(int device);

// Blocks of `func` resident at once on the device at the largest carveout (cluster > 0: resident
// clusters of that many blocks), cached per launch shape.
int max_active(const DeviceInfo& di, const void* func, int threads, std::int64_t smem, int cluster);

// Sets `func`'s smallest shared-memory carveout that holds blocks_per_sm blocks of `smem` dynamic
// bytes; the rest of the multiprocessor's memory stays L1.
void set_carveout(const DeviceInfo& di, const void* func, int blocks_per_sm, std::int64_t smem, bool clustered);

// A launch configuration; with `cluster` > 0 it carries that cluster dimension as an attribute,
// with `cooperative` the cooperative-launch attribute (all blocks resident at once), stored in
// `attr` (which must outlive the configuration).
cudaLaunchConfig_t launch_config(dim3 grid, int threads, std::int64_t smem, int cluster, bool cooperative,
                                 cudaStream_t stream, cudaLaunchAttribute& attr);

// Programmatic dependent launch (sm_90 code): a kernel launched with this attribute may be scheduled
// while the kernel before it in the stream finishes; it calls grid_dependency_wait() before it
// touches memory that kernel (or any earlier work in the stream) writes. Used by the fused layers'
// row passes and the softmax split passes.
inline cudaLaunchAttribute dependent_launch_attribute() {
  cudaLaunchAttribute attr{};
  attr.id                                         = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  return attr;
}

#if defined(__CUDACC__)
// Waits until the kernel this one was launched as a dependent of is complete and its writes are
// visible; a no-op when not launched as a dependent (and before sm_90).
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
// Lets the kernel launched as this one's dependent be scheduled (before sm_90: nothing).
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
#endif

// Stream-ordered device memory from the library's pool on `device` (kept across synchronizations);
// free with cudaFreeAsync on a stream ordered after the last use.
void* workspace_alloc(int device, std::size_t bytes, cudaStream_t stream);

// Throws std::invalid_argument("softfuse::cuda_specialized::softmax: <what>").
[[noreturn]] void throw_invalid(const std::string& what);
// throw_cuda(err, what) unless err is cudaSuccess.
void check(cudaError_t err, const char* what);

// As throw_invalid and throw_cuda, for the fused layers ("softfuse::cuda_specialized::linear: <what>...").
[[noreturn]] void throw_linear_invalid(const std::string& what);
[[noreturn]] void throw_linear_cuda(cudaError_t err, const char* what);
inline void check_linear(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw_linear_cuda(err, what);
}

// A launch without attributes. Kernels go through cudaLaunchKernelEx, whose result is the launch's own:
// checking cudaGetLastError() after a <<<>>> launch would report whatever error an earlier call left.
inline cudaLaunchConfig_t plain_launch(dim3 grid, unsigned threads, cudaStream_t stream) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim  = grid;
  cfg.blockDim = dim3(threads);
  cfg.stream   = stream;
  return cfg;
}

// Device memory from the library's pool (workspace_alloc), allocated on a stream and freed on it
// when the owner goes out of scope (also when an exception leaves the call): the stream orders
// every use before the free.
class StreamBuffer {
 public:
  StreamBuffer(std::size_t bytes, cudaStream_t stream, const char* what);
  ~StreamBuffer();
  StreamBuffer(const StreamBuffer&)            = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  float* data() const { return static_cast<float*>(p_); }

 private:
  void* p_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse

#endif
