#ifndef SOFTFUSE_IMPL_ROW_EXP_HPP
#define SOFTFUSE_IMPL_ROW_EXP_HPP

// exp for the softmax row passes. On GPUs the vendor's expf/exp. On host CPUs, for float, a
// branch-free Cody-Waite reduction plus a degree-6 polynomial (Cephes' expf coefficients, about
// 2 ulp) that compilers vectorize: glibc's scalar expf would make the host passes compute-bound.
// The row passes only ask for x <= 0 (x - max, or max - x with a larger x): -inf -> 0, NaN -> NaN,
// x < -87 -> 0 (below 1.6e-38); positive x are exact up to 88, inf beyond.

#include <cstdint>
#include <cstring>

#include "softfuse_math.hpp"

namespace softfuse {
namespace Impl {

KOKKOS_INLINE_FUNCTION float row_exp(const float x) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) || defined(__SYCL_DEVICE_ONLY__)
  return Impl::exp(x);
#else
  // k = round(x / ln2) by the 1.5 * 2^23 trick: the sum's low mantissa bits hold k as an integer.
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const float k = shifted - 12582912.0f;
  const float r = (x - k * 0.693359375f) + k * 2.12194440e-4f;  // x - k ln2, ln2 split in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  std::uint32_t k_bits, x_bits, e_bits;
  std::memcpy(&k_bits, &shifted, sizeof k_bits);
  const std::uint32_t scale_bits = (k_bits - 0x4B400000u + 127u) << 23;  // 2^k (garbage where masked below)
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  const float e = p * scale;
  std::memcpy(&x_bits, &x, sizeof x_bits);
  std::memcpy(&e_bits, &e, sizeof e_bits);
  // Special cases as bit masks, not branches: a branch makes the compiler keep the floating-point
  // work conditional, and then it does not vectorize the loop.
  const std::uint32_t nan = 0u - static_cast<std::uint32_t>((x_bits & 0x7fffffffu) > 0x7f800000u);
  const std::uint32_t tiny = 0u - static_cast<std::uint32_t>(x_bits > 0xC2AE0000u);  // x < -87, -inf
  const std::uint32_t huge = 0u - static_cast<std::uint32_t>((x_bits > 0x42B00000u) & (x_bits < 0x80000000u));  // x > 88
  const std::uint32_t out_bits = (nan & x_bits) | (~nan & ((huge & 0x7f800000u) | (~huge & ~tiny & e_bits)));
  float out;
  std::memcpy(&out, &out_bits, sizeof out);
  return out;
#endif
}

KOKKOS_INLINE_FUNCTION double row_exp(const double x) { return Impl::exp(x); }

}  // namespace Impl
}  // namespace softfuse

#endif
