#include "Test_OpenMP.hpp"
#include "Test_RowExp.hpp"
