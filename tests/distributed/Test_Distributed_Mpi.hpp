#ifndef SOFTFUSE_TEST_DISTRIBUTED_MPI_HPP
#define SOFTFUSE_TEST_DISTRIBUTED_MPI_HPP

#include <softfuse_distributed.hpp>

namespace TestDistributed {

inline const softfuse::distributed::MpiCommunicator& test_communicator() {
  static const softfuse::distributed::MpiCommunicator comm(MPI_COMM_WORLD);
  return comm;
}

}  // namespace TestDistributed

#endif
