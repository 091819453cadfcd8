#include "Test_OpenMP.hpp"
#include "Test_Properties.hpp"
