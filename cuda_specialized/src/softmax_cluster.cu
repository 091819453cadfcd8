// Long rows: the row spread over the shared memory (and, for the longest rows, the registers)
// of up to 16 blocks of a thread-block cluster (sm_90), max and sum joined through DSMEM, or
// of up to 32 blocks of a cooperative grid, joined through global memory.
#include "softmax_row_kernel.cuh"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

namespace {
template <class T, int V, RowJoin J>
const void* long_row_kernel_v(int threads, int kr) {
  if (kr == 0) {
    switch (threads) {
      case 256: return reinterpret_cast<const void*>(&softmax_row_kernel<T, V, 256, 0, J>);
      case 512: return reinterpret_cast<const void*>(&softmax_row_kernel<T, V, 512, 0, J>);
      default: return nullptr;
    }
  }
  if constexpr (V > 1) {
    if (kr == kRowRegisterVectors && threads == 512)
      return reinterpret_cast<const void*>(&softmax_row_kernel<T, V, 512, kRowRegisterVectors, J>);
    // grid groups run two 256-thread blocks per SM
    if constexpr (J == RowJoin::grid) {
      if (kr == kRowRegisterVectors && threads == 256)
        return reinterpret_cast<const void*>(&softmax_row_kernel<T, V, 256, kRowRegisterVectors, J>);
    }
  }
  return nullptr;
}

template <class T, RowJoin J>
const void* long_row_kernel(int vec, int threads, int kr) {
  constexpr int VV = 16 / static_cast<int>(sizeof(T));
  if (vec == VV) return long_row_kernel_v<T, VV, J>(threads, kr);
  if (vec == 1) return long_row_kernel_v<T, 1, J>(threads, kr);
  return nullptr;
}
}  // namespace

template <class T>
const void* cluster_row_kernel(int vec, int threads, int kr) {
  return long_row_kernel<T, RowJoin::cluster>(vec, threads, kr);
}

template <class T>
const void* group_row_kernel(int vec, int threads, int kr) {
  return long_row_kernel<T, RowJoin::grid>(vec, threads, kr);
}

template const void* cluster_row_kernel<float>(int, int, int);
template const void* cluster_row_kernel<double>(int, int, int);
template const void* group_row_kernel<float>(int, int, int);
template const void* group_row_kernel<double>(int, int, int);

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse
