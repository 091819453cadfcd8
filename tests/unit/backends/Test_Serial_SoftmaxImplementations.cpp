#include "Test_Serial.hpp"
#include "Test_SoftmaxImplementations.hpp"
