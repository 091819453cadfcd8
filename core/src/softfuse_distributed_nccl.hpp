#ifndef SOFTFUSE_DISTRIBUTED_NCCL_HPP
#define SOFTFUSE_DISTRIBUTED_NCCL_HPP

/// \file
/// softfuse::distributed::NcclCommunicator — an NCCL communicator for the softfuse::distributed operations on
/// Kokkos::Cuda (built with -DSOFTFUSE_ENABLE_NCCL=ON; link softfuse::distributed).

#include <nccl.h>

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

}  // namespace distributed
}  // namespace softfuse

#endif
