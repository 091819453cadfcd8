#include "Test_Cuda.hpp"
#include "Test_Distributed_Nccl.hpp"
#include "Test_Distributed.hpp"
