#include "Test_Serial.hpp"
#include "Test_LinearGeluSoftmax.hpp"
