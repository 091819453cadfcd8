#ifndef SOFTFUSE_BACKENDS_CUDA_SOFTMAX_CUDA_HPP
#define SOFTFUSE_BACKENDS_CUDA_SOFTMAX_CUDA_HPP

// softmax on Kokkos::Cuda: the hand-tuned kernels of cuda_specialized/ for float/double rows that
// are contiguous in device memory; everything else stays on the portable path.

#include <Kokkos_Core.hpp>

#include <softfuse/cuda_specialized/softmax.hpp>

#include <cstdint>
#include <type_traits>

#include "cuda/softfuse_cuda_views.hpp"
#include "impl/softfuse_softmax_spec.hpp"

namespace softfuse {
namespace Impl {

template <class XView, class YView>
struct SoftmaxSpecialization<Kokkos::Cuda, XView, YView,
                             std::enable_if_t<std::is_same<typename XView::memory_space, Kokkos::CudaSpace>::value &&
                                              std::is_same<typename YView::memory_space, Kokkos::CudaSpace>::value>> {
  static constexpr bool exists = true;

  static bool applies(const Kokkos::Cuda& space, const XView& x, const YView& y) {
    return rows_contiguous(x) && rows_contiguous(y) && cuda_specialized::softmax_available(space.cuda_device());
  }

  static void run(const Kokkos::Cuda& space, const XView& x, const YView& y) {
    cuda_specialized::softmax(x.data(), row_pitch(x), y.data(), row_pitch(y), y.extent(0), y.extent(1),
                              space.cuda_stream());
  }
};

}  // namespace Impl
}  // namespace softfuse

#endif
