#include "Test_OpenMP.hpp"
#include "Test_LinearBatchNormSoftmax.hpp"
