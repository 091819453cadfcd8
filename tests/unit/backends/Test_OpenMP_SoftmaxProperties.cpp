#include "Test_OpenMP.hpp"
#include "Test_SoftmaxProperties.hpp"
