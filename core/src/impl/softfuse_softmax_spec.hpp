#ifndef SOFTFUSE_IMPL_SOFTMAX_SPEC_HPP
#define SOFTFUSE_IMPL_SOFTMAX_SPEC_HPP

// Backend specializations of softmax plug in here: a backend provides a partial specialization of
// SoftmaxSpecialization with `exists = true`, `applies(space, x, y)` (a runtime check: layout,
// strides, device) and `run(space, x, y)`. The primary template says no specialization exists.

namespace softfuse {
namespace Impl {

template <class ExecSpace, class XView, class YView, class Enable = void>
struct SoftmaxSpecialization {
  static constexpr bool exists = false;
};

}  // namespace Impl
}  // namespace softfuse

#endif
