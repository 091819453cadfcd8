#ifndef SOFTFUSE_IMPL_BATCHNORM_CHECKS_HPP
#define SOFTFUSE_IMPL_BATCHNORM_CHECKS_HPP

// Run-time checks of the BatchNorm arguments of linear_batchnorm_softmax (single-process and distributed).

#include <type_traits>

#include "softfuse_view_checks.hpp"

namespace softfuse {
namespace Impl {

template <class WView, class BatchNormT, class SView>
void require_batchnorm_extents(const char* function, const WView& weight, const BatchNormT& bn, const SView& scale) {
  const char* const names[] = {"bn.gamma", "bn.beta", "bn.running_mean", "bn.running_var"};
  const std::remove_reference_t<decltype(bn.gamma)>* const vectors[] = {&bn.gamma, &bn.beta, &bn.running_mean,
                                                                        &bn.running_var};
  for (int k = 0; k < 4; ++k)
    require_extents(vectors[k]->extent(0) == weight.extent(0), function,
                    "BatchNorm parameters must have out = weight.extent(0) elements", names[k], *vectors[k], "weight",
                    weight);
  require_extents(scale.extent(0) == 1 || scale.extent(0) == weight.extent(0), function,
                  "scale must have 1 element or out = weight.extent(0) elements", "scale", scale, "weight", weight);
  require_extents(bn.workspace.extent(0) == 0 ||
                      (bn.workspace.extent(0) >= 3 * weight.extent(0) && bn.workspace.span_is_contiguous()),
                  function, "bn.workspace must be empty or hold 3 * out = 3 * weight.extent(0) contiguous elements",
                  "bn.workspace", bn.workspace, "weight", weight);
}

}  // namespace Impl
}  // namespace softfuse

#endif
