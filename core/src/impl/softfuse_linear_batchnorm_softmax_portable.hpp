#ifndef SOFTFUSE_IMPL_LINEAR_BATCHNORM_SOFTMAX_PORTABLE_HPP
#define SOFTFUSE_IMPL_LINEAR_BATCHNORM_SOFTMAX_PORTABLE_HPP

// The portable Linear -> BatchNorm -> scale -> softmax: the GEMM writes the bias-free logits into y, a
// per-feature pass folds bias, BatchNorm and scale into an affine map per feature (reading the logits twice in
// training mode for the batch statistics), and one row pass applies it and the softmax in place.

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "softfuse_batchnorm_affine.hpp"
#include "softfuse_softmax_portable.hpp"
#include "softfuse_linear_gemm.hpp"

namespace softfuse {
namespace Impl {

template <class AffineView>
struct FeatureAffineOp {
  AffineView affine;

  template <class T>
  KOKKOS_INLINE_FUNCTION T operator()(const std::int64_t j, const T z) const {
    return (z + affine(j, 0)) * affine(j, 1) + affine(j, 2);
  }
};

// workspace: 3 * out elements of y's memory space, or nullptr to allocate them for this call.
template <class ExecSpace, class XView, class WView, class BView, class PView, class RView, class SView, class YView>
void linear_batchnorm_softmax_portable(const ExecSpace& space, const XView& x, const WView& weight, const BView& bias,
                                       const PView& gamma, const PView& beta, const RView& running_mean,
                                       const RView& running_var, double eps, double momentum, bool training,
                                       const SView& scale, const YView& y,
                                       typename YView::non_const_value_type* workspace) {
  using T           = typename YView::non_const_value_type;
  using device_type = Kokkos::Device<ExecSpace, typename YView::memory_space>;
  using affine_type = Kokkos::View<T* [3], Kokkos::LayoutRight, device_type, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const std::int64_t out = y.extent(1);
  if (y.extent(0) == 0 || out == 0) return;

  Kokkos::View<T*, device_type> owned;
  if (!workspace) {
    owned     = decltype(owned)(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "softfuse::batchnorm_workspace"),
                            3 * out);
    workspace = owned.data();
  }
  const affine_type affine(workspace, out);
  linear_gemm(space, x, weight, y);
  const BatchNormAffineParams<affine_type, PView, SView> params{affine, gamma, beta, scale, eps};
  if (training)
    batchnorm_affine_training(space, y, params, bias, running_mean, running_var, momentum);
  else
    batchnorm_affine_inference(space, params, bias, running_mean, running_var);
  // Rows cached wherever they fit: op (erf, BatchNorm) then runs once per element, not twice.
  row_softmax(space, y, y, FeatureAffineOp<affine_type>{affine}, true, "softfuse::linear_batchnorm_softmax[portable]");
}

}  // namespace Impl
}  // namespace softfuse

#endif
