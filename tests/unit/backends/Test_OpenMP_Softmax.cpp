#include "Test_OpenMP.hpp"
#include "Test_Softmax.hpp"
