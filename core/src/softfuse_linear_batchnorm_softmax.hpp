#ifndef SOFTFUSE_LINEAR_BATCHNORM_SOFTMAX_HPP
#define SOFTFUSE_LINEAR_BATCHNORM_SOFTMAX_HPP

/// \file
/// softfuse::linear_batchnorm_softmax — Linear -> BatchNorm1d -> scale -> softmax over the features.

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "softfuse_config.hpp"
#include "softfuse_implementation.hpp"
#include "softfuse_precision.hpp"
#include "impl/softfuse_batchnorm_checks.hpp"
#include "impl/softfuse_dispatch.hpp"
#include "impl/softfuse_linear_batchnorm_softmax_portable.hpp"
#include "impl/softfuse_linear_checks.hpp"
#include "impl/softfuse_linear_spec.hpp"
#ifdef SOFTFUSE_HAVE_CUDA_SPECIALIZED
#include "cuda/softfuse_linear_cuda.hpp"
#endif

namespace softfuse {

/// training: normalize with the batch mean and the biased batch variance of each feature, and update the
/// running statistics; inference: normalize with the running statistics, update nothing.
enum class BatchNormMode { training, inference };

/// BatchNorm1d over the `out` features: parameters and state as rank-1 Views [out] of the layer's value type,
/// plus its options (defaults: those of the reference framework).
///
///   softfuse::BatchNorm<Kokkos::View<float*>> bn{gamma, beta, running_mean, running_var};
///   bn.mode = softfuse::BatchNormMode::inference;
template <class VectorView>
struct BatchNorm {
  VectorView gamma, beta;                ///< the affine weight and bias
  VectorView running_mean, running_var;  ///< read in inference mode; updated in place in training mode
  BatchNormMode mode = BatchNormMode::training;
  double eps         = 1e-5;  ///< added to the variance
  double momentum    = 0.1;   ///< running = (1 - momentum) running + momentum batch_stat
  /// Optional scratch for the per-feature values, at least 3 * out contiguous elements. Without it each call
  /// allocates and frees its own, which costs time on GPUs (Kokkos 3.x's free synchronizes the device).
  VectorView workspace;
};

namespace Impl {

// split, ld_split: a Tf32x3Weight's split (or nullptr) for Precision::tf32x3.
template <class ExecSpace, class XView, class WView, class BView, class VectorView, class SView, class YView>
Implementation linear_batchnorm_softmax_run(const ExecSpace& space, const XView& x, const WView& weight,
                                            const BView& bias, const BatchNorm<VectorView>& bn, const SView& scale,
                                            const YView& y, Implementation implementation, Precision precision,
                                            const float* split, std::int64_t ld_split) {
  constexpr const char* function = "softfuse::linear_batchnorm_softmax";
  SOFTFUSE_IMPL_CHECK_LINEAR_VIEWS("softfuse::linear_batchnorm_softmax", ExecSpace, XView, WView, BView, YView);
  SOFTFUSE_IMPL_CHECK_OUTPUT_VIEW("softfuse::linear_batchnorm_softmax", ExecSpace, VectorView, "bn's Views", 1, XView);
  SOFTFUSE_IMPL_CHECK_INPUT_VIEW("softfuse::linear_batchnorm_softmax", ExecSpace, SView, "scale", 1, XView);
  Impl::require_linear_extents(function, x, weight, bias, y);
  const bool training = bn.mode == BatchNormMode::training;
  Impl::require_extents(!training || x.extent(0) > 1, function,
                        "training mode needs more than one row to compute batch statistics", "x", x, "y", y);
  Impl::require_batchnorm_extents(function, weight, bn, scale);
  const bool has_workspace = bn.workspace.extent(0) != 0;
  return Impl::dispatch<Impl::LinearSpecialization<ExecSpace>>(
      function, implementation,
      [&](auto s) { return decltype(s)::applies_batchnorm(space, x, weight, bias, bn, scale, y); },
      [&](auto s) {
        decltype(s)::batchnorm(space, x, weight, bias, bn, training, scale, y, precision, split, ld_split);
      },
      [&] {
        using RView = Impl::exec_view_t<ExecSpace, VectorView, false>;
        Impl::linear_batchnorm_softmax_portable(
            space, Impl::exec_view_t<ExecSpace, XView>(x), Impl::exec_view_t<ExecSpace, WView>(weight),
            Impl::exec_view_t<ExecSpace, BView>(bias), Impl::exec_view_t<ExecSpace, VectorView>(bn.gamma),
            Impl::exec_view_t<ExecSpace, VectorView>(bn.beta), RView(bn.running_mean), RView(bn.running_var), bn.eps,
            bn.momentum, training, Impl::exec_view_t<ExecSpace, SView>(scale),
            Impl::exec_view_t<ExecSpace, YView, false>(y), has_workspace ? bn.workspace.data() : nullptr);
      });
}

}  // namespace Impl

/// y(i, :) = softmax(scale * batchnorm(x(i, :) · weightᵀ + bias)) for every row i.
///
/// x [batch, in], weight [out, in] (the reference framework's storage), bias [out], y [batch, out]; bn's Views
/// [out]; scale a rank-1 View of 1 element (a scalar, the reference framework's shape (1,)) or of `out`
/// elements (one per feature). All of float or double, one value type, any layout; LayoutRight throughout is
/// the fast path (the GEMM goes to the BLAS / cuBLAS TPL where Kokkos Kernels has one).
/// Training mode: batch mean and biased batch variance normalize; bn.running_mean and bn.running_var become
/// (1 - momentum) running + momentum (batch mean, unbiased batch variance), computed on the device.
/// The GEMM (KokkosBlas::gemm) writes the logits into y, which is then transformed in place: no other
/// [batch, out] memory is used, only 3 * out elements of bn.workspace (allocated per call if bn has none).
/// Implementations and `precision` as for linear_gelu_softmax: the CUDA specialization (float Views in
/// CudaSpace, rows and vectors contiguous, out small enough for one block) puts the bias into the cuBLASLt
/// GEMM's epilogue, takes the batch statistics in one more read of the logits and finishes in one row kernel;
/// the portable path is asynchronous on `space` except that with Kokkos Kernels before 4.1 (no instance-aware
/// gemm) it fences `space` before the GEMM and the default instance after it.
/// Throws std::invalid_argument when extents do not fit together, for training mode with fewer than two rows
/// (no batch variance), and for Implementation::specialized where no specialization applies;
/// std::runtime_error from the CUDA specialization when CUDA or cuBLASLt fails.
/// Returns the implementation that ran: Implementation::specialized or Implementation::portable.
template <class ExecSpace, class XView, class WView, class BView, class VectorView, class SView, class YView>
Implementation linear_batchnorm_softmax(const ExecSpace& space, const XView& x, const WView& weight, const BView& bias,
                                        const BatchNorm<VectorView>& bn, const SView& scale, const YView& y,
                                        Implementation implementation = Implementation::automatic,
                                        Precision precision           = Precision::fp32) {
  return Impl::linear_batchnorm_softmax_run(space, x, weight, bias, bn, scale, y, implementation, precision, nullptr,
                                            0);
}

/// As above in Precision::tf32x3, with the weight's split made once (see Tf32x3Weight).
template <class ExecSpace, class XView, class WView, class BView, class VectorView, class SView, class YView>
Implementation linear_batchnorm_softmax(const ExecSpace& space, const XView& x, const Tf32x3Weight<WView>& weight,
                                        const BView& bias, const BatchNorm<VectorView>& bn, const SView& scale,
                                        const YView& y, Implementation implementation = Implementation::automatic) {
  const auto& split = weight.split();
  return Impl::linear_batchnorm_softmax_run(space, x, weight.weight(), bias, bn, scale, y, implementation,
                                            Precision::tf32x3, split.extent(0) ? split.data() : nullptr,
                                            static_cast<std::int64_t>(split.extent(1)));
}

/// As above, on a default-constructed instance of y's execution space.
template <class XView, class WView, class BView, class VectorView, class SView, class YView>
Implementation linear_batchnorm_softmax(const XView& x, const WView& weight, const BView& bias,
                                        const BatchNorm<VectorView>& bn, const SView& scale, const YView& y,
                                        Implementation implementation = Implementation::automatic,
                                        Precision precision           = Precision::fp32) {
  static_assert(Kokkos::is_view<YView>::value, "softfuse::linear_batchnorm_softmax: y must be a Kokkos::View");
  return linear_batchnorm_softmax(typename YView::execution_space{}, x, weight, bias, bn, scale, y, implementation,
                                  precision);
}

}  // namespace softfuse

#endif
