#include "Test_Serial.hpp"
#include "Test_LinearGeluSoftmaxProperties.hpp"
