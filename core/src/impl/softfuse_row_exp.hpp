#ifndef SOFTFUSE_IMPL_ROW_EXP_HPP
#define SOFTFUSE_IMPL_ROW_EXP_HPP

// exp for the softmax row passes. On GPUs the vendor's expf/exp. On host CPUs a branch-free
// Cody-Waite reduction plus a polynomial that compilers vectorize (glibc's scalar exp would make the
// host passes compute-bound): for float Cephes' degree-6 expf polynomial (about 2 ulp); for double a
// degree-13 Taylor polynomial on |r| <= ln2/2 (truncation below 2e-16, a few ulp in all).
// Semantics: NaN -> NaN, -inf -> 0, +inf -> inf; results below the smallest normal number flush to 0
// (x < -87 for float, x < -708 for double), results beyond the largest finite one give inf
// (x > 88 for float, x > 709 for double; the row passes only take x <= 0).

#include <cstdint>
#include <cstring>

#include "softfuse_math.hpp"

namespace softfuse {
namespace Impl {

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && !defined(__SYCL_DEVICE_ONLY__)
/// exp(x) on the host, without special cases: exact to the bounds above for x in [-87, 88] (float) and
/// [-708, 709] (double), any value elsewhere (NaN for NaN).
inline float row_exp_in_range(const float x) {
  // k = round(x / ln2) by the 1.5 * 2^23 trick: the sum's low mantissa bits hold k as an integer.
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const float k       = shifted - 12582912.0f;
  const float r       = (x - k * 0.693359375f) + k * 2.12194440e-4f;  // x - k ln2, ln2 split in two parts
  float p             = 1.9875691500e-4f;
  p                   = p * r + 1.3981999507e-3f;
  p                   = p * r + 8.3334519073e-3f;
  p                   = p * r + 4.1665795894e-2f;
  p                   = p * r + 1.6666665459e-1f;
  p                   = p * r + 5.0000001201e-1f;
  p                   = p * r * r + r + 1.0f;
  std::uint32_t k_bits;
  std::memcpy(&k_bits, &shifted, sizeof k_bits);
  const std::uint32_t scale_bits = (k_bits - 0x4B400000u + 127u) << 23;  // 2^k (garbage out of range)
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return p * scale;
}

inline double row_exp_in_range(const double x) {
  // k = round(x / ln2) by the 1.5 * 2^52 trick; ln2 split so that k * ln2_hi is exact.
  const double shifted = x * 1.4426950408889634 + 6755399441055744.0;
  const double k       = shifted - 6755399441055744.0;
  const double r       = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
  double p             = 1.0 / 6227020800;
  p                    = p * r + 1.0 / 479001600;
  p                    = p * r + 1.0 / 39916800;
  p                    = p * r + 1.0 / 3628800;
  p                    = p * r + 1.0 / 362880;
  p                    = p * r + 1.0 / 40320;
  p                    = p * r + 1.0 / 5040;
  p                    = p * r + 1.0 / 720;
  p                    = p * r + 1.0 / 120;
  p                    = p * r + 1.0 / 24;
  p                    = p * r + 1.0 / 6;
  p                    = p * r + 0.5;
  p                    = p * r * r + r + 1.0;
  std::uint64_t k_bits;
  std::memcpy(&k_bits, &shifted, sizeof k_bits);
  const std::uint64_t scale_bits = (k_bits - 0x4338000000000000ull + 1023u) << 52;  // 2^k (garbage out of range)
  double scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return p * scale;
}
#endif

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && !defined(__SYCL_DEVICE_ONLY__)
/// The bit patterns of row_exp's special cases.
template <class T>
struct RowExpBits;
template <>
struct RowExpBits<float> {
  using U                      = std::uint32_t;
  static constexpr U magnitude = 0x7fffffffu, inf = 0x7f800000u, sign = 0x80000000u;
  static constexpr U tiny = 0xC2AE0000u, huge = 0x42B00000u;  // -87, 88
};
template <>
struct RowExpBits<double> {
  using U                      = std::uint64_t;
  static constexpr U magnitude = 0x7fffffffffffffffull, inf = 0x7ff0000000000000ull, sign = 0x8000000000000000ull;
  static constexpr U tiny = 0xC086200000000000ull, huge = 0x4086280000000000ull;  // -708, 709
};

/// row_exp_in_range's e = exp(x) with the special cases: NaN for NaN, 0 for x < tiny (and -inf), inf for
/// x > huge. Bit masks, not branches: a branch makes the compiler keep the floating-point work conditional,
/// and then it does not vectorize the loop.
template <class T>
inline T row_exp_special_cases(const T x, const T e) {
  using B = RowExpBits<T>;
  using U = typename B::U;
  U x_bits, e_bits;
  std::memcpy(&x_bits, &x, sizeof x_bits);
  std::memcpy(&e_bits, &e, sizeof e_bits);
  const U nan      = U(0) - static_cast<U>((x_bits & B::magnitude) > B::inf);
  const U tiny     = U(0) - static_cast<U>(x_bits > B::tiny);  // sign set, magnitude above the threshold
  const U huge     = U(0) - static_cast<U>((x_bits > B::huge) & (x_bits < B::sign));
  const U out_bits = (nan & x_bits) | (~nan & ((huge & B::inf) | (~huge & ~tiny & e_bits)));
  T out;
  std::memcpy(&out, &out_bits, sizeof out);
  return out;
}
#endif

KOKKOS_INLINE_FUNCTION float row_exp(const float x) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) || defined(__SYCL_DEVICE_ONLY__)
  return Impl::exp(x);
#else
  return row_exp_special_cases(x, row_exp_in_range(x));
#endif
}

KOKKOS_INLINE_FUNCTION double row_exp(const double x) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) || defined(__SYCL_DEVICE_ONLY__)
  return Impl::exp(x);
#else
  return row_exp_special_cases(x, row_exp_in_range(x));
#endif
}

/// row_exp(x) for x <= 0 or NaN (x - max in the row passes), the same values with fewer instructions on
/// the host: only the flush below -87 / -708 to handle (NaN stays NaN through the polynomial). The flush is
/// a bit mask: with `x < -87 ? 0 : e` GCC moved the polynomial under the branch, and without AVX-512's
/// masked instructions it then left the row passes' exponential loop scalar (AVX2: about 0.2 of copy).
template <class T>
KOKKOS_INLINE_FUNCTION T row_exp_nonpositive(const T x) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) || defined(__SYCL_DEVICE_ONLY__)
  return Impl::exp(x);
#else
  using U   = typename RowExpBits<T>::U;
  const T e = row_exp_in_range(x);
  U bits;
  std::memcpy(&bits, &e, sizeof bits);
  bits &= U(0) - static_cast<U>(!(x < (sizeof(T) == 4 ? T(-87) : T(-708))));
  T out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
#endif
}

}  // namespace Impl
}  // namespace softfuse

#endif
