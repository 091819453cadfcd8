#ifndef SOFTFUSE_TEST_SERIAL_HPP
#define SOFTFUSE_TEST_SERIAL_HPP

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

using TestExecSpace = Kokkos::Serial;
class serial : public ::testing::Test {};
#define TestCategory serial

#endif
