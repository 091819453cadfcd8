#include "Test_Cuda.hpp"
#include "Test_ErrorModel.hpp"
