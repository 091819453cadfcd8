#include "Test_Cuda.hpp"
#include "Test_Properties.hpp"
