#include "Test_OpenMP.hpp"
#include "Test_Distributed_Mpi.hpp"
#include "Test_Distributed.hpp"
