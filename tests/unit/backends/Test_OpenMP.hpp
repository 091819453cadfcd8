#ifndef SOFTFUSE_TEST_OPENMP_HPP
#define SOFTFUSE_TEST_OPENMP_HPP

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

using TestExecSpace = Kokkos::OpenMP;
class openmp : public ::testing::Test {};
#define TestCategory openmp

#endif
