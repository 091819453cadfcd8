#include "Test_OpenMP.hpp"
#include "Test_Gelu.hpp"
