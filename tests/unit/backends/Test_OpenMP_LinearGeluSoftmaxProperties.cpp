#include "Test_OpenMP.hpp"
#include "Test_LinearGeluSoftmaxProperties.hpp"
