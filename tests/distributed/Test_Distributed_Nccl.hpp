#ifndef SOFTFUSE_TEST_DISTRIBUTED_NCCL_HPP
#define SOFTFUSE_TEST_DISTRIBUTED_NCCL_HPP

// One NCCL communicator over MPI_COMM_WORLD's ranks (one GPU each), made once: rank 0's unique id broadcast.

#include <mpi.h>
#include <nccl.h>

#include <softfuse_distributed.hpp>

namespace TestDistributed {

inline const softfuse::distributed::NcclCommunicator& test_communicator() {
  static const softfuse::distributed::NcclCommunicator comm([] {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ncclUniqueId id;
    if (rank == 0) ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t c;
    if (ncclCommInitRank(&c, size, id, rank) != ncclSuccess) throw std::runtime_error("ncclCommInitRank failed");
    return c;
  }());
  return comm;
}

}  // namespace TestDistributed

#endif
