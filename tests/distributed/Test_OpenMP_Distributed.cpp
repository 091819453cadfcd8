#include "Test_OpenMP.hpp"
#include "Test_Distributed.hpp"
