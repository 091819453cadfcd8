#include "Test_Cuda.hpp"
#include "Test_ErrorModel.hpp"
#include "Test_CudaFailedCalls.hpp"
