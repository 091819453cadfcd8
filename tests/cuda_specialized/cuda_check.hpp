#ifndef SOFTFUSE_TESTS_CUDA_CHECK_HPP
#define SOFTFUSE_TESTS_CUDA_CHECK_HPP

// Shared by the kernel tests and the kernel benchmarks (perf/cuda_specialized): a failing CUDA call ends the
// program with exit status 2; a program run where no CUDA device exists exits with kNoDevice, which ctest
// reports as skipped.

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CK(call)                                                                                     \
  do {                                                                                               \
    cudaError_t e_ = (call);                                                                         \
    if (e_ != cudaSuccess) {                                                                         \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, \
                   cudaGetErrorString(e_));                                                          \
      std::exit(2);                                                                                  \
    }                                                                                                \
  } while (0)

namespace softfuse_test {

constexpr int kNoDevice = 77;

/// True where a CUDA device can run kernels; otherwise says why on stdout.
inline bool cuda_device_present() {
  int count           = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::printf("no CUDA device (%s): skipped\n", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return false;
  }
  return true;
}

}  // namespace softfuse_test

#endif
