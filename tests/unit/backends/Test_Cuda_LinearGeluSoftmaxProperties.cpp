#include "Test_Cuda.hpp"
#include "Test_LinearGeluSoftmaxProperties.hpp"
