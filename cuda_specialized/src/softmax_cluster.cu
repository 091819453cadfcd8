// Long rows (sm_90): the row spread over the shared memory (and, for the longest rows, the
// registers) of a thread-block cluster of up to 16 blocks; max and sum joined through DSMEM.
#include "softmax_row_kernel.cuh"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

namespace {
template <class T, int V>
const void* cluster_row_kernel_v(int threads, int kr) {
  if (kr == 0) {
    switch (threads) {
      case 256: return reinterpret_cast<const void*>(&softmax_row_kernel<T, V, 256, 0, true>);
      case 512: return reinterpret_cast<const void*>(&softmax_row_kernel<T, V, 512, 0, true>);
      default: return nullptr;
    }
  }
  if constexpr (V > 1) {
    if (kr == kRowRegisterVectors && threads == 512)
      return reinterpret_cast<const void*>(
          &softmax_row_kernel<T, V, 512, kRowRegisterVectors, true>);
  }
  return nullptr;
}
}  // namespace

template <class T>
const void* cluster_row_kernel(int vec, int threads, int kr) {
  constexpr int VV = 16 / static_cast<int>(sizeof(T));
  if (vec == VV) return cluster_row_kernel_v<T, VV>(threads, kr);
  if (vec == 1) return cluster_row_kernel_v<T, 1>(threads, kr);
  return nullptr;
}

template const void* cluster_row_kernel<float>(int, int, int);
template const void* cluster_row_kernel<double>(int, int, int);

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse
