#include "Test_OpenMP.hpp"
#include "Test_Concurrency.hpp"
