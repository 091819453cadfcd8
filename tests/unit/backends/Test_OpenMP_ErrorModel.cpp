#include "Test_OpenMP.hpp"
#include "Test_ErrorModel.hpp"
