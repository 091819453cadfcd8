#include "Test_OpenMP.hpp"
#include "Test_LinearPrecision.hpp"
