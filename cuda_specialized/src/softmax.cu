// The entry points of include/softfuse/cuda_specialized/softmax.hpp.
#include <cstdint>

#include <cuda_runtime.h>

#include "runtime.hpp"
#include "softfuse/cuda_specialized/softmax.hpp"
#include "softmax_launch.hpp"
#include "softmax_plan.hpp"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

namespace {

template <class T>
void softmax_impl(const T* x, std::int64_t ldx, T* y, std::int64_t ldy, std::int64_t rows, std::int64_t cols,
                  cudaStream_t stream) {
  const Problem<T> p{x, ldx, y, ldy, rows, cols};
  validate(p);
  if (rows == 0 || cols == 0) return;
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  const DeviceInfo& di = device_info(dev);
  if (!di.available) throw_cuda(cudaErrorNoKernelImageForDevice, "no usable kernel image for the current device");
  run_plan(di, make_plan(di, p), p, stream);
}

}  // namespace

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

void softmax(const float* x, std::int64_t ldx, float* y, std::int64_t ldy, std::int64_t rows, std::int64_t cols,
             cudaStream_t stream) {
  impl::softmax_impl(x, ldx, y, ldy, rows, cols, stream);
}

void softmax(const double* x, std::int64_t ldx, double* y, std::int64_t ldy, std::int64_t rows, std::int64_t cols,
             cudaStream_t stream) {
  impl::softmax_impl(x, ldx, y, ldy, rows, cols, stream);
}

}  // namespace cuda_specialized
}  // namespace softfuse
