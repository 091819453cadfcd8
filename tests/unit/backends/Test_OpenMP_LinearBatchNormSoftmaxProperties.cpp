#include "Test_OpenMP.hpp"
#include "Test_LinearBatchNormSoftmaxProperties.hpp"
