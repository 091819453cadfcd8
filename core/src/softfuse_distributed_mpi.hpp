#ifndef SOFTFUSE_DISTRIBUTED_MPI_HPP
#define SOFTFUSE_DISTRIBUTED_MPI_HPP

/// \file
/// softfuse::distributed::MpiCommunicator — an MPI communicator for the softfuse::distributed operations
/// (built with -DSOFTFUSE_ENABLE_MPI=ON; link softfuse::distributed).

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's MPIX_Query_cuda_support
#endif

#include <stdexcept>
#include <string>

namespace softfuse {
namespace distributed {

/// Wraps an MPI_Comm the caller owns (it must outlive the wrapper; MPI must be initialized). Every rank of the
/// communicator must make the same distributed calls in the same order, as for any MPI collective.
/// Device Views are staged through host memory unless MPI says it is CUDA-aware (MPIX_Query_cuda_support)
/// and the Views are in Kokkos::CudaSpace.
class MpiCommunicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    if (MPI_Comm_rank(comm, &rank_) != MPI_SUCCESS || MPI_Comm_size(comm, &size_) != MPI_SUCCESS)
      throw std::invalid_argument("softfuse::distributed::MpiCommunicator: not a valid communicator");
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    cuda_aware_ = MPIX_Query_cuda_support() == 1;
#endif
  }

  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Whether MPI reads and writes CUDA device memory itself.
  bool cuda_aware() const { return cuda_aware_; }

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  bool cuda_aware_ = false;
};

}  // namespace distributed
}  // namespace softfuse

#endif
