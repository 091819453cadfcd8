#include "Test_Serial.hpp"
#include "Test_Concurrency.hpp"
