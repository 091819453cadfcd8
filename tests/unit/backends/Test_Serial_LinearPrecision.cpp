#include "Test_Serial.hpp"
#include "Test_LinearPrecision.hpp"
