#ifndef SOFTFUSE_TEST_DISTRIBUTED_NCCL_HPP
#define SOFTFUSE_TEST_DISTRIBUTED_NCCL_HPP

// One NCCL communicator over MPI_COMM_WORLD's ranks (one GPU each), made once.

#include <softfuse_distributed.hpp>

namespace TestDistributed {

inline const softfuse::distributed::NcclCommunicator& test_communicator() {
  static const softfuse::distributed::NcclCommunicator comm(softfuse::distributed::nccl_comm_from_mpi(MPI_COMM_WORLD));
  return comm;
}

}  // namespace TestDistributed

#endif
