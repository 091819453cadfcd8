// Compiles every NCCL code path of softfuse::distributed where Kokkos has no CUDA backend (CI): the NCCL
// reductions are instantiated on the host execution space, handed a null stream. Never run: NCCL needs
// device memory, and the library accepts NcclCommunicator only with Kokkos::Cuda.

#include <Kokkos_Core.hpp>
#include <cuda_runtime.h>

#include <softfuse_distributed.hpp>

namespace softfuse {
namespace Impl {
template <>
struct NcclStream<Kokkos::DefaultHostExecutionSpace> {
  static constexpr bool exists = true;
  static cudaStream_t get(const Kokkos::DefaultHostExecutionSpace&) { return nullptr; }
};
}  // namespace Impl
}  // namespace softfuse

template <class T>
void instantiate(const softfuse::distributed::NcclCommunicator& comm) {
  using Space  = Kokkos::DefaultHostExecutionSpace;
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, Space::memory_space>;
  using Vector = Kokkos::View<T*, Space::memory_space>;
  const Space space;
  const Matrix x("x", 2, 3), w("w", 4, 3), y("y", 2, 4);
  const Vector b("b", 4), scale("scale", 1);
  softfuse::BatchNorm<Vector> bn{Vector("g", 4), Vector("b", 4), Vector("m", 4), Vector("v", 4)};
  softfuse::distributed::softmax(space, comm, x, x);
  softfuse::distributed::linear_gelu_softmax(space, comm, x, w, b, y, softfuse::Gelu::tanh);
  softfuse::distributed::linear_batchnorm_softmax(space, comm, x, w, b, bn, scale, y);
}

template void instantiate<float>(const softfuse::distributed::NcclCommunicator&);
template void instantiate<double>(const softfuse::distributed::NcclCommunicator&);
