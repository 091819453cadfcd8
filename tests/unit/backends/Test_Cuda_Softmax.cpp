#include "Test_Cuda.hpp"
#include "Test_Softmax.hpp"
