#include "Test_Cuda.hpp"
#include "Test_Gelu.hpp"
