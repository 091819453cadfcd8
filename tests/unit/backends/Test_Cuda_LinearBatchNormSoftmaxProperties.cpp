#include "Test_Cuda.hpp"
#include "Test_LinearBatchNormSoftmaxProperties.hpp"
