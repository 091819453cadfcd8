#include "Test_Serial.hpp"
#include "Test_Distributed_Mpi.hpp"
#include "Test_Distributed.hpp"
