#ifndef SOFTFUSE_HPP
#define SOFTFUSE_HPP

/// \file
/// Everything softfuse offers.

#include "softfuse_implementation.hpp"
#include "softfuse_linear_batchnorm_softmax.hpp"
#include "softfuse_linear_gelu_softmax.hpp"
#include "softfuse_precision.hpp"
#include "softfuse_softmax.hpp"
#include "softfuse_team_softmax.hpp"

#endif
