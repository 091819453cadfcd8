#include "Test_Cuda.hpp"
#include "Test_Concurrency.hpp"
