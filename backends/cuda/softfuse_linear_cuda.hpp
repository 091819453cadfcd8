#ifndef SOFTFUSE_BACKENDS_CUDA_LINEAR_CUDA_HPP
#define SOFTFUSE_BACKENDS_CUDA_LINEAR_CUDA_HPP

// The fused layers on Kokkos::Cuda: the cuBLASLt GEMM and row kernels of cuda_specialized/ for float Views in
// device memory with contiguous rows (x, weight, y) and vectors, and rows of y short enough for one block
// (linear_max_out); everything else stays on the portable path.

#include <Kokkos_Core.hpp>

#include <softfuse/cuda_specialized/linear.hpp>

#include <cstdint>

#include "cuda/softfuse_cuda_views.hpp"
#include "impl/softfuse_linear_spec.hpp"
#include "softfuse_precision.hpp"

namespace softfuse {
namespace Impl {

template <>
struct LinearSpecialization<Kokkos::Cuda> {
  static constexpr bool exists = true;
  // cuBLAS through Kokkos Kernels under the driver's default cache preference, not Kokkos' (linear.hpp)
  using gemm_scope = cuda_specialized::DefaultCachePreference;

  static cuda_specialized::GemmPrecision gemm_precision(Precision p) {
    return p == Precision::tf32     ? cuda_specialized::GemmPrecision::tf32
           : p == Precision::tf32x3 ? cuda_specialized::GemmPrecision::tf32x3
                                    : cuda_specialized::GemmPrecision::fp32;
  }

  // The View types the kernels take (float in CudaSpace); the runtime checks are in applies_*.
  template <class XView, class WView, class BView, class YView>
  static constexpr bool takes() {
    return is_cuda_view_of<XView, float>() && is_cuda_view_of<WView, float>() && is_cuda_view_of<BView, float>() &&
           is_cuda_view_of<YView, float>();
  }

  template <class XView, class WView, class BView, class YView>
  static bool applies_gelu(const Kokkos::Cuda& space, const XView& x, const WView& w, const BView& b, const YView& y) {
    if constexpr (takes<XView, WView, BView, YView>()) {
      return rows_contiguous(x) && rows_contiguous(w) && rows_contiguous(y) && vector_contiguous(b) &&
             static_cast<std::int64_t>(y.extent(1)) <= cuda_specialized::linear_max_out(space.cuda_device());
    } else {
      return false;
    }
  }

  template <class XView, class WView, class BView, class BN, class SView, class YView>
  static bool applies_batchnorm(const Kokkos::Cuda& space, const XView& x, const WView& w, const BView& b, const BN& bn,
                                const SView& scale, const YView& y) {
    using VectorView = decltype(bn.gamma);
    if constexpr (is_cuda_view_of<VectorView, float>() && is_cuda_view_of<SView, float>()) {
      return vector_contiguous(bn.gamma) && vector_contiguous(bn.beta) && vector_contiguous(bn.running_mean) &&
             vector_contiguous(bn.running_var) && vector_contiguous(scale) && applies_gelu(space, x, w, b, y);
    } else {
      return false;
    }
  }

  template <class XView, class WView, class BView, class YView>
  static cuda_specialized::LinearOperands operands(const XView& x, const WView& w, const BView& b, const YView& y,
                                                   Precision precision, const float* split, std::int64_t ld_split) {
    return {x.data(),
            row_pitch(x),
            w.data(),
            row_pitch(w),
            b.data(),
            y.data(),
            row_pitch(y),
            static_cast<std::int64_t>(x.extent(0)),
            static_cast<std::int64_t>(x.extent(1)),
            static_cast<std::int64_t>(w.extent(0)),
            gemm_precision(precision),
            split,
            ld_split};
  }

  template <class XView, class WView, class BView, class YView>
  static void gelu(const Kokkos::Cuda& space, const XView& x, const WView& w, const BView& b, const YView& y,
                   bool exact, Precision precision, const float* split, std::int64_t ld_split) {
    if constexpr (takes<XView, WView, BView, YView>())
      cuda_specialized::linear_gelu_softmax(operands(x, w, b, y, precision, split, ld_split), exact,
                                            space.cuda_stream());
  }

  template <class XView, class WView, class BView, class BN, class SView, class YView>
  static void batchnorm(const Kokkos::Cuda& space, const XView& x, const WView& w, const BView& b, const BN& bn,
                        bool training, const SView& scale, const YView& y, Precision precision, const float* split,
                        std::int64_t ld_split) {
    using VectorView = decltype(bn.gamma);
    if constexpr (takes<XView, WView, BView, YView>() && is_cuda_view_of<VectorView, float>() &&
                  is_cuda_view_of<SView, float>()) {
      const cuda_specialized::BatchNormOperands bno{bn.gamma.data(),
                                                    bn.beta.data(),
                                                    bn.running_mean.data(),
                                                    bn.running_var.data(),
                                                    scale.data(),
                                                    static_cast<std::int64_t>(scale.extent(0)),
                                                    training,
                                                    bn.eps,
                                                    bn.momentum,
                                                    bn.workspace.extent(0) ? bn.workspace.data() : nullptr};
      cuda_specialized::linear_batchnorm_softmax(operands(x, w, b, y, precision, split, ld_split), bno,
                                                 space.cuda_stream());
    }
  }

  // Fills split with weight's [low | high] parts where the specialization can use them; leaves it alone
  // otherwise (the layers then run on the weight itself).
  template <class WView, class SplitView>
  static void split_weight(const Kokkos::Cuda& space, const WView& w, SplitView& split) {
    if constexpr (is_cuda_view_of<WView, float>()) {
      if (!rows_contiguous(w) || !cuda_specialized::linear_available(space.cuda_device())) return;
      const std::size_t out = w.extent(0), in = w.extent(1);
      if (split.extent(0) != out || split.extent(1) != 2 * in)
        split = SplitView(Kokkos::view_alloc(Kokkos::WithoutInitializing, "softfuse::tf32x3_weight"), out, 2 * in);
      cuda_specialized::split_weight_tf32x3(w.data(), row_pitch(w), static_cast<std::int64_t>(out),
                                            static_cast<std::int64_t>(in), split.data(),
                                            static_cast<std::int64_t>(2 * in), space.cuda_stream());
    }
  }
};

}  // namespace Impl
}  // namespace softfuse

#endif
