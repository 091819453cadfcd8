#ifndef SOFTFUSE_IMPL_MATH_HPP
#define SOFTFUSE_IMPL_MATH_HPP

// The few math functions the kernels need, spelled once for every supported Kokkos version:
// Kokkos 3.7 moved them from Kokkos::Experimental to Kokkos (the old names are gone in 4.x).

#include <Kokkos_Core.hpp>
#include <cmath>

namespace softfuse {
namespace Impl {

#if KOKKOS_VERSION >= 30700
using Kokkos::erf;
using Kokkos::exp;
using Kokkos::fmax;
using Kokkos::sqrt;
using Kokkos::tanh;
#else
using Kokkos::Experimental::erf;
using Kokkos::Experimental::exp;
using Kokkos::Experimental::fmax;
using Kokkos::Experimental::sqrt;
using Kokkos::Experimental::tanh;
#endif

/// +infinity of T, usable in device code (HUGE_VAL* are compiler builtins, unlike numeric_limits).
template <class T>
struct Infinity;
template <>
struct Infinity<float> {
  static constexpr float value = HUGE_VALF;
};
template <>
struct Infinity<double> {
  static constexpr double value = HUGE_VAL;
};

}  // namespace Impl
}  // namespace softfuse

#endif
