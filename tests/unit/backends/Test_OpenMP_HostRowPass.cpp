#include "Test_OpenMP.hpp"
#include "Test_HostRowPass.hpp"
