#include "Test_Serial.hpp"
#include "Test_LinearBatchNormSoftmax.hpp"
