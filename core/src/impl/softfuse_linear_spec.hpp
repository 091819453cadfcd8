#ifndef SOFTFUSE_IMPL_LINEAR_SPEC_HPP
#define SOFTFUSE_IMPL_LINEAR_SPEC_HPP

// Backend specializations of the fused layers plug in here, as for softmax (softfuse_softmax_spec.hpp): a
// backend provides LinearSpecialization<ExecSpace> with `exists = true` and
//   applies_gelu(space, x, w, b, y), applies_batchnorm(space, x, w, b, bn, scale, y)  (runtime checks),
//   gelu(space, x, w, b, y, exact, precision, split, ld_split),
//   batchnorm(space, x, w, b, bn, training, scale, y, precision, split, ld_split),
//   split_weight(space, weight, split)  (fills a Tf32x3Weight's split, or leaves it empty),
// and may give the portable path's GEMM a scope to run in, `gemm_scope` (a type constructed before the
// vendor BLAS call and destroyed after it; GemmScope below).
// The primary template says no specialization exists.

#include <type_traits>

namespace softfuse {
namespace Impl {

template <class ExecSpace, class Enable = void>
struct LinearSpecialization {
  static constexpr bool exists = false;
};

/// The scope the portable path's GEMM runs in on ExecSpace: the specialization's gemm_scope, or nothing.
template <class ExecSpace, class Enable = void>
struct GemmScope {
  struct type {};
};
template <class ExecSpace>
struct GemmScope<ExecSpace, std::void_t<typename LinearSpecialization<ExecSpace>::gemm_scope>> {
  using type = typename LinearSpecialization<ExecSpace>::gemm_scope;
};

}  // namespace Impl
}  // namespace softfuse

#endif
