#include "Test_OpenMP.hpp"
#include "Test_SoftmaxImplementations.hpp"
