#include "Test_Cuda.hpp"
#include "Test_LinearPrecision.hpp"
