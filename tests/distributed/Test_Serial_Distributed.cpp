#include "Test_Serial.hpp"
#include "Test_Distributed.hpp"
