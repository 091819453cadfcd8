#include "Test_Serial.hpp"
#include "Test_Gelu.hpp"
