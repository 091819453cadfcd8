#ifndef SOFTFUSE_IMPL_LINEAR_SPEC_HPP
#define SOFTFUSE_IMPL_LINEAR_SPEC_HPP

// Backend specializations of the fused layers plug in here, as for softmax (softfuse_softmax_spec.hpp): a
// backend provides LinearSpecialization<ExecSpace> with `exists = true` and
//   applies_gelu(space, x, w, b, y), applies_batchnorm(space, x, w, b, bn, scale, y)  (runtime checks),
//   gelu(space, x, w, b, y, exact, precision, split, ld_split),
//   batchnorm(space, x, w, b, bn, training, scale, y, precision, split, ld_split),
//   split_weight(space, weight, split)  (fills a Tf32x3Weight's split, or leaves it empty).
// The primary template says no specialization exists.

namespace softfuse {
namespace Impl {

template <class ExecSpace, class Enable = void>
struct LinearSpecialization {
  static constexpr bool exists = false;
};

}  // namespace Impl
}  // namespace softfuse

#endif
