#include "Test_Cuda.hpp"
#include "Test_Distributed_Mpi.hpp"
#include "Test_Distributed.hpp"
