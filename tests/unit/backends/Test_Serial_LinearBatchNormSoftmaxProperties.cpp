#include "Test_Serial.hpp"
#include "Test_LinearBatchNormSoftmaxProperties.hpp"
