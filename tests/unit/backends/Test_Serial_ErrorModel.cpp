#include "Test_Serial.hpp"
#include "Test_ErrorModel.hpp"
