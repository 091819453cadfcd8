#include "Test_Cuda.hpp"
#include "Test_LinearGeluSoftmax.hpp"
