// Private: the launch of a softmax plan (softmax_launch.cu), host side only.
#ifndef SOFTFUSE_CUDA_SPECIALIZED_SOFTMAX_LAUNCH_HPP
#define SOFTFUSE_CUDA_SPECIALIZED_SOFTMAX_LAUNCH_HPP

#include <cuda_runtime_api.h>

#include "runtime.hpp"
#include "softmax_plan.hpp"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

// Throws std::invalid_argument for extents, leading dimensions or pointers no plan can take.
template <class T>
void validate(const Problem<T>& p);

// Checks the plan against the problem and the device (std::invalid_argument if it cannot
// run), fills in what it leaves to occupancy, and launches on `stream`.
template <class T>
void run_plan(const DeviceInfo& di, const Plan& plan, const Problem<T>& p, cudaStream_t stream);

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse

#endif
