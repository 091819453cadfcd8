#include "Test_Cuda.hpp"
#include "Test_SoftmaxImplementations.hpp"
