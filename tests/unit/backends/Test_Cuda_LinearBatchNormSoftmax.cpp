#include "Test_Cuda.hpp"
#include "Test_LinearBatchNormSoftmax.hpp"
