#ifndef SOFTFUSE_DISTRIBUTED_NCCL_HPP
#define SOFTFUSE_DISTRIBUTED_NCCL_HPP

/// \file
/// softfuse::distributed::NcclCommunicator — an NCCL communicator for the softfuse::distributed operations on
/// Kokkos::Cuda (built with -DSOFTFUSE_ENABLE_NCCL=ON; link softfuse::distributed).

#include <nccl.h>
#ifdef SOFTFUSE_HAVE_MPI
#include <mpi.h>
#endif

#include <stdexcept>
#include <string>

namespace softfuse {
namespace distributed {

/// Wraps an ncclComm_t the caller owns (it must outlive the wrapper), one GPU per rank. The operations run
/// NCCL's collectives on the execution space instance's stream (space.cuda_stream()), in order with the
/// kernels; every rank must make the same distributed calls in the same order.
class NcclCommunicator {
 public:
  explicit NcclCommunicator(ncclComm_t comm) : comm_(comm) {
    if (ncclCommUserRank(comm, &rank_) != ncclSuccess || ncclCommCount(comm, &size_) != ncclSuccess)
      throw std::invalid_argument("softfuse::distributed::NcclCommunicator: not a valid communicator");
  }

  ncclComm_t comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  ncclComm_t comm_;
  int rank_ = 0, size_ = 1;
};

#ifdef SOFTFUSE_HAVE_MPI
/// A new NCCL communicator over the ranks of `comm` (rank 0's unique id broadcast over MPI); call after choosing
/// this rank's GPU (Kokkos::initialize does). The caller destroys it with ncclCommDestroy.
inline ncclComm_t nccl_comm_from_mpi(MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  ncclUniqueId id;
  if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess)
    throw std::runtime_error("softfuse::distributed::nccl_comm_from_mpi: ncclGetUniqueId failed");
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm);
  ncclComm_t nccl;
  if (ncclCommInitRank(&nccl, size, id, rank) != ncclSuccess)
    throw std::runtime_error("softfuse::distributed::nccl_comm_from_mpi: ncclCommInitRank failed");
  return nccl;
}
#endif

}  // namespace distributed
}  // namespace softfuse

#endif
