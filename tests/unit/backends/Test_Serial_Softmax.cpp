#include "Test_Serial.hpp"
#include "Test_Softmax.hpp"
