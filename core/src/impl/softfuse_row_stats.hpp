#ifndef SOFTFUSE_IMPL_ROW_STATS_HPP
#define SOFTFUSE_IMPL_ROW_STATS_HPP

// The one-pass softmax statistics of a row: its maximum m and the sum s of exp(x - m), updated
// online (rescaling s whenever m grows) so the row is read once for both. The sum is kept in double
// even for float rows: a float sum over millions of columns would drift past 1e-5.
//
// Semantics (those of the reference framework): a NaN element makes s NaN; a +inf element makes
// m = +inf; a row of -inf keeps s = 0. inverse_sum() turns the last two into NaN rows as well.

#include "softfuse_math.hpp"
#include "softfuse_row_exp.hpp"

// Lets host compilers vectorize a loop 16 lanes wide (a full AVX-512 vector of float, where compilers would
// otherwise take half of one), and a sum by reordering it across those lanes (OpenMP's simd
// directive, without -ffast-math); nothing where OpenMP is off and in device code.
#if defined(_OPENMP) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && !defined(__SYCL_DEVICE_ONLY__)
#define SOFTFUSE_IMPL_PRAGMA(text) _Pragma(#text)
#define SOFTFUSE_IMPL_SIMD SOFTFUSE_IMPL_PRAGMA(omp simd simdlen(16))
#define SOFTFUSE_IMPL_SIMD_SUM(var) SOFTFUSE_IMPL_PRAGMA(omp simd simdlen(16) reduction(+ : var))
#else
#define SOFTFUSE_IMPL_SIMD
#define SOFTFUSE_IMPL_SIMD_SUM(var)
#endif

namespace softfuse {
namespace Impl {

template <class T>
struct RowStats {
  T max;
  double sum;

  KOKKOS_INLINE_FUNCTION static RowStats identity() { return {-Infinity<T>::value, 0.0}; }

  /// Adds the `len` values v[0..len) (len <= Block). Their maximum is found first, so the sum is
  /// rescaled at most once per block, and the exp loop has no branch. Every loop runs to a
  /// compile-time bound (partial blocks guard with l < len): GPUs keep v in registers, and host
  /// compilers vectorize full blocks (the maximum over Lanes independent chains, the sum reordered
  /// across SIMD lanes).
  template <int Block, int Lanes = (Block < 8 ? Block : (Block < 64 ? 8 : 16))>
  KOKKOS_INLINE_FUNCTION void add_block(const T (&v)[Block], const int len) {
    const bool full = len == Block;
    T lane_max[Lanes];
    for (int w = 0; w < Lanes; ++w) lane_max[w] = v[0];
    if (full) {
      for (int l = 0; l < Block; l += Lanes)
        for (int w = 0; w < Lanes; ++w) lane_max[w] = v[l + w] > lane_max[w] ? v[l + w] : lane_max[w];
    } else {
      for (int l = 1; l < Block; ++l)
        if (l < len) lane_max[0] = v[l] > lane_max[0] ? v[l] : lane_max[0];
    }
    T block_max = lane_max[0];
    for (int w = 1; w < Lanes; ++w) block_max = lane_max[w] > block_max ? lane_max[w] : block_max;
    if (block_max > max) {
      sum *= static_cast<double>(row_exp(max - block_max));  // max == -inf: exp(-inf) = 0
      max = block_max;
    }
    if (max == -Infinity<T>::value) {  // only -inf and NaN so far: -inf adds 0, NaN poisons
      for (int l = 0; l < Block; ++l)
        if (l < len && v[l] != v[l]) sum = static_cast<double>(v[l]);
      return;
    }
    if (full) {
      // A partial sum in T over the block (exact enough), the row sum in double.
      T part = 0;
      SOFTFUSE_IMPL_SIMD_SUM(part)
      for (int l = 0; l < Block; ++l) part += row_exp(v[l] - max);
      sum += static_cast<double>(part);
    } else {
      for (int l = 0; l < Block; ++l)
        if (l < len) sum += static_cast<double>(row_exp(v[l] - max));
    }
  }

  KOKKOS_INLINE_FUNCTION static RowStats combine(const RowStats& a, const RowStats& b) {
    const T m = a.max > b.max ? a.max : b.max;
    // Equal maxima (including two -inf identities) scale by exactly 1, never by exp(-inf - -inf).
    const double sa = a.max == m ? a.sum : a.sum * static_cast<double>(row_exp(a.max - m));
    const double sb = b.max == m ? b.sum : b.sum * static_cast<double>(row_exp(b.max - m));
    return {m, sa + sb};
  }

  /// 1/s, or NaN where the framework's semantics give a NaN row (+inf present, all -inf, NaN).
  KOKKOS_INLINE_FUNCTION T inverse_sum() const {
    if (max == Infinity<T>::value || sum == 0.0) return Infinity<T>::value - Infinity<T>::value;
    return static_cast<T>(1.0 / sum);
  }
};

/// Kokkos reducer over RowStats, for nested (team / vector) parallel_reduce; the result lives in a
/// thread's own variable, so its View is a HostSpace one, as for Kokkos' built-in reducers.
template <class T>
struct RowStatsReducer {
  using reducer          = RowStatsReducer;
  using value_type       = RowStats<T>;
  using result_view_type = Kokkos::View<value_type, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  value_type& value;

  KOKKOS_INLINE_FUNCTION explicit RowStatsReducer(value_type& v) : value(v) {}

  KOKKOS_INLINE_FUNCTION void join(value_type& dst, const value_type& src) const {
    dst = value_type::combine(dst, src);
  }
#if KOKKOS_VERSION < 40000
  // Kokkos 3.x joins through volatile references; 4.x deprecates that form.
  KOKKOS_INLINE_FUNCTION void join(volatile value_type& dst, const volatile value_type& src) const {
    const value_type a{dst.max, dst.sum}, b{src.max, src.sum};
    const value_type r = value_type::combine(a, b);
    dst.max            = r.max;
    dst.sum            = r.sum;
  }
#endif
  KOKKOS_INLINE_FUNCTION void init(value_type& v) const { v = value_type::identity(); }
  KOKKOS_INLINE_FUNCTION value_type& reference() const { return value; }
  KOKKOS_INLINE_FUNCTION result_view_type view() const { return result_view_type(&value); }
  KOKKOS_INLINE_FUNCTION bool references_scalar() const { return true; }
};

}  // namespace Impl
}  // namespace softfuse

#endif
