#include "Test_Serial.hpp"
#include "Test_SoftmaxProperties.hpp"
