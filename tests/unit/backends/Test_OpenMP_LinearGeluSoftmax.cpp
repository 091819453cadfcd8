#include "Test_OpenMP.hpp"
#include "Test_LinearGeluSoftmax.hpp"
