#include "Test_Serial.hpp"
#include "Test_RowExp.hpp"
