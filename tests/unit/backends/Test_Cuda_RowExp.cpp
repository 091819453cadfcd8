#include "Test_Cuda.hpp"
#include "Test_RowExp.hpp"
