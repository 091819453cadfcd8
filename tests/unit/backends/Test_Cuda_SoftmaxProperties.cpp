#include "Test_Cuda.hpp"
#include "Test_SoftmaxProperties.hpp"
