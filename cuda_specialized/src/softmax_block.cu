// Medium rows, the row in shared memory, persistent over rows: one warp per row (rows of 4 to
// 16 KB: many rows in flight per SM) or one block per row (128-thread blocks also with
// kBlockRegisterVectors vectors per thread in registers: less shared memory per row, more rows
// resident per SM).
#include "softmax_row_kernel.cuh"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

namespace {
template <class T, int V>
const void* block_row_kernel_v(int threads, int group, int kr) {
  if (kr != 0) {
    if constexpr (V > 1) {
      if (kr == kBlockRegisterVectors && threads == 128 && group == 128)
        return reinterpret_cast<const void*>(&softmax_row_kernel<T, V, 128, kBlockRegisterVectors, RowJoin::block>);
    }
    return nullptr;
  }
  if (group == 32 && threads == 128)
    return reinterpret_cast<const void*>(&softmax_row_kernel<T, V, 128, 0, RowJoin::block, 32>);
  if (group != threads) return nullptr;
  switch (threads) {
    case 128: return reinterpret_cast<const void*>(&softmax_row_kernel<T, V, 128, 0, RowJoin::block>);
    case 256: return reinterpret_cast<const void*>(&softmax_row_kernel<T, V, 256, 0, RowJoin::block>);
    case 512: return reinterpret_cast<const void*>(&softmax_row_kernel<T, V, 512, 0, RowJoin::block>);
    default: return nullptr;
  }
}
}  // namespace

template <class T>
const void* block_row_kernel(int vec, int threads, int group, int kr) {
  constexpr int VV = 16 / static_cast<int>(sizeof(T));
  if (vec == VV) return block_row_kernel_v<T, VV>(threads, group, kr);
  if (vec == 1) return block_row_kernel_v<T, 1>(threads, group, kr);
  return nullptr;
}

template const void* block_row_kernel<float>(int, int, int, int);
template const void* block_row_kernel<double>(int, int, int, int);

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse
