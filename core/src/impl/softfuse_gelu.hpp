#ifndef SOFTFUSE_IMPL_GELU_HPP
#define SOFTFUSE_IMPL_GELU_HPP

// GELU for the portable row pass of Linear -> GELU -> softmax, exact (z Phi(z) = z erfc(-z / sqrt 2) / 2) and
// tanh-approximated (z (1 + tanh(sqrt(2 / pi) (z + 0.044715 z^3))) / 2).
// On GPUs the vendor's erf and tanh. On host CPUs branch-free forms the compiler vectorizes (the scalar library
// erf and tanh made the host row pass compute-bound; docs/host_path.md):
//  - exact, float: erfc(u) = exp(-u^2) t P(t), t = 1 / (1 + u / 2), u = |z| / sqrt 2, with P of degree 9 fitted
//    (Chebyshev) to erfc(u) exp(u^2) / t on t in (0, 1] (fit error 9e-8); GELU is z erfc(u) / 2 for z < 0 and
//    z (2 - erfc(u)) / 2 otherwise, so negative z keep their relative accuracy (1 + erf(z / sqrt 2) cancels).
//    Double keeps the library erf (a polynomial to 1e-16 is not worth its length here).
//  - tanh, both types: (1 + tanh(w)) / 2 = 1 / (1 + exp(-2 w)), through row_exp (no cancellation for z < 0).
// Semantics as the reference framework's: NaN -> NaN, +inf -> +inf, -inf -> NaN (-inf * 0).

#include <Kokkos_Core.hpp>

#include <type_traits>

#include "softfuse_math.hpp"
#include "softfuse_row_exp.hpp"

namespace softfuse {
namespace Impl {

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && !defined(__SYCL_DEVICE_ONLY__)
/// erfc(u) for u >= 0 or NaN, on the host: relative error about 1e-6 (within a few ulp where erfc(u) > 1e-7),
/// 0 from u = 9.33 (exp(-u^2) flushes below -87); NaN for NaN.
inline float host_erfc_nonnegative(const float u) {
  const float t = 1.0f / (1.0f + 0.5f * u);
  float p       = -1.857025437e-02f;
  p             = p * t + 3.404347849e-02f;
  p             = p * t + 8.598342588e-02f;
  p             = p * t - 2.523635427e-01f;
  p             = p * t + 1.098438108e-01f;
  p             = p * t + 4.826816996e-02f;
  p             = p * t + 1.822434340e-01f;
  p             = p * t + 2.463468137e-01f;
  p             = p * t + 2.821098754e-01f;
  p             = p * t + 2.820947160e-01f;
  return t * p * row_exp_nonpositive(-(u * u));
}
#endif

template <class T>
KOKKOS_INLINE_FUNCTION T gelu_exact(const T z) {
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && !defined(__SYCL_DEVICE_ONLY__)
  if constexpr (std::is_same<T, float>::value) {
    const float c = host_erfc_nonnegative((z < 0 ? -z : z) * 0.70710678118654752440f);
    return 0.5f * z * (z < 0 ? c : 2.0f - c);
  }
#endif
  return T(0.5) * z * (T(1) + Impl::erf(z * T(0.70710678118654752440)));  // erf(z / sqrt(2))
}

template <class T>
KOKKOS_INLINE_FUNCTION T gelu_tanh(const T z) {
  const T w = T(0.79788456080286535588) * (z + T(0.044715) * z * z * z);  // sqrt(2/pi)
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && !defined(__SYCL_DEVICE_ONLY__)
  return z / (T(1) + row_exp(T(-2) * w));
#else
  return T(0.5) * z * (T(1) + Impl::tanh(w));
#endif
}

}  // namespace Impl
}  // namespace softfuse

#endif
