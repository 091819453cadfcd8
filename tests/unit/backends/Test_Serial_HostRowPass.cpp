#include "Test_Serial.hpp"
#include "Test_HostRowPass.hpp"
