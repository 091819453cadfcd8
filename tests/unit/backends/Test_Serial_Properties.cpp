#include "Test_Serial.hpp"
#include "Test_Properties.hpp"
