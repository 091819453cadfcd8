#ifndef SOFTFUSE_TEST_CUDA_HPP
#define SOFTFUSE_TEST_CUDA_HPP

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

using TestExecSpace = Kokkos::Cuda;
class cuda : public ::testing::Test {};
#define TestCategory cuda

#endif
