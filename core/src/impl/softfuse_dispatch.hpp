#ifndef SOFTFUSE_IMPL_DISPATCH_HPP
#define SOFTFUSE_IMPL_DISPATCH_HPP

// The choice every operation makes between its backend specialization and its portable implementation.

#include <stdexcept>
#include <string>

#include "../softfuse_implementation.hpp"

namespace softfuse {
namespace Impl {

// Runs `run(Specialization{})` where Specialization::exists, `implementation` is not portable and
// `applies(Specialization{})` holds; otherwise throws std::invalid_argument (prefixed with `function`) for
// Implementation::specialized, and runs `portable()` for the others. Returns the implementation that ran
// (Implementation::specialized or Implementation::portable). `applies` and `run` are generic lambdas
// taking the specialization as an argument, so their bodies are only instantiated where it exists.
template <class Specialization, class Applies, class Run, class Portable>
Implementation dispatch(const char* function, Implementation implementation, const Applies& applies, const Run& run,
                        const Portable& portable) {
  if constexpr (Specialization::exists) {
    if (implementation != Implementation::portable && applies(Specialization{})) {
      run(Specialization{});
      return Implementation::specialized;
    }
  }
  if (implementation == Implementation::specialized)
    throw std::invalid_argument(std::string(function) +
                                ": Implementation::specialized requested, but no backend specialization applies to "
                                "this execution space and these Views");
  portable();
  return Implementation::portable;
}

}  // namespace Impl
}  // namespace softfuse

#endif
