#ifndef SOFTFUSE_PRECISION_HPP
#define SOFTFUSE_PRECISION_HPP

/// \file
/// softfuse::Precision and softfuse::Tf32x3Weight — how the GEMM of a fused layer runs.

#include <Kokkos_Core.hpp>

#include <type_traits>

#include "impl/softfuse_linear_spec.hpp"

namespace softfuse {

/// The arithmetic of a fused layer's GEMM on float Views, where a backend specialization runs it on tensor
/// cores (CUDA: cuBLASLt); the errors measured on the H100 are in the README.
///  - fp32:   fp32 SGEMM, the default;
///  - tf32:   TF32 tensor cores: inputs rounded to 10 mantissa bits, about 3e-4 relative error in the logits;
///  - tf32x3: each operand split into a high and a low TF32 part, three tensor-core products added in fp32 in
///            short K-slices: fp32-level error (within 2x of the SGEMM's) at about twice the SGEMM's speed.
///            Its error is biased, not random: the tensor cores truncate their sums toward zero, so most logits
///            come out slightly smaller in magnitude than exact, by a similar fraction in every row. Averages
///            over the batch keep that bias: in BatchNorm training mode the batch mean (and so running_mean)
///            of the 1024 x 8192 x 8192 workload (x in [0, 1)) is off by 2.7e-6 of its largest magnitude,
///            against 1.2e-7 for fp32, whose rounding errors average out (docs/tf32x3.md). Use fp32 where
///            the running statistics must be fp32-accurate.
/// The portable implementation, and double Views everywhere, always run the GEMM in the Views' own type, which
/// is at least as accurate as any mode asks.
enum class Precision { fp32, tf32, tf32x3 };

/// A float weight [out, in] with its 3xTF32 split made once, for repeated tf32x3 calls:
///
///   softfuse::Tf32x3Weight<decltype(w)> w3(space, w);   // 2 * out * in floats more, in w's memory space
///   softfuse::linear_gelu_softmax(space, x, w3, b, y);   // Precision::tf32x3, no split per call
///
/// Where no backend specialization runs tf32x3 (host backends, Views it does not take) the split stays empty and
/// the layers use weight() as it is. Call update() after changing the weight's values.
template <class WView>
class Tf32x3Weight {
  static_assert(Kokkos::is_view<WView>::value && static_cast<int>(WView::rank) == 2,
                "softfuse::Tf32x3Weight: the weight must be a rank-2 View");
  static_assert(std::is_same<typename WView::non_const_value_type, float>::value,
                "softfuse::Tf32x3Weight: tf32x3 splits float weights");

 public:
  using split_type = Kokkos::View<float**, Kokkos::LayoutRight, typename WView::memory_space>;

  template <class ExecSpace>
  Tf32x3Weight(const ExecSpace& space, const WView& weight) : weight_(weight) {
    update(space);
  }

  /// Recomputes the split from the weight's current values; asynchronous on `space`.
  template <class ExecSpace>
  void update(const ExecSpace& space) {
    static_assert(Kokkos::is_execution_space<ExecSpace>::value,
                  "softfuse::Tf32x3Weight: the first argument must be a Kokkos execution space");
    if constexpr (Impl::LinearSpecialization<ExecSpace>::exists)
      Impl::LinearSpecialization<ExecSpace>::split_weight(space, weight_, split_);
  }

  const WView& weight() const { return weight_; }
  /// [out, 2 * in]: the low parts, then the high parts of each row; empty where unused.
  const split_type& split() const { return split_; }

 private:
  WView weight_;
  split_type split_;
};

}  // namespace softfuse

#endif
