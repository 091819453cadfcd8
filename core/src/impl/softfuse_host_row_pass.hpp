#ifndef SOFTFUSE_IMPL_HOST_ROW_PASS_HPP
#define SOFTFUSE_IMPL_HOST_ROW_PASS_HPP

// The row pass of host CPUs (the packed regime: one thread per row), with one exponential per element.
// The row is cut into chunks that stay in the core's L1: per chunk, v = op(j, x(j)) goes to y while its
// maximum m_c is found, then y(j) = exp(v_j - m_c) is written back and summed (a T partial of 4 terms per
// SIMD lane, the row sum in double); m_c is kept. The write pass scales each chunk by exp(m_c - max) / sum,
// a multiply per element, reading y back from the core's cache where the row fits there.
// Rows beyond the caches move y twice, 4 bytes more per float than reading x twice does, and were still
// faster than the two-exponential passes of softfuse_row_pass.hpp, which stay for the split regime and
// TeamSoftmax (docs/portable_path.md).
//
// Semantics as RowStats: NaN makes the row NaN (its exp is NaN), +inf too (max = +inf), a row of -inf
// is NaN (sum 0), a chunk of -inf in a finite row gives 0 (its m_c is taken as 0, exp(-inf) = 0).

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>

#include "softfuse_row_exp.hpp"
#include "softfuse_row_stats.hpp"

namespace softfuse {
namespace Impl {

// Tunables: a chunk holds at least kHostChunkBytes (in L1 between its two steps) and a row at most
// kHostMaxChunks chunks (their maxima live on the stack).
constexpr std::size_t kHostChunkBytes = 8192;
constexpr std::int64_t kHostMaxChunks = 512;

/// y_row = softmax(op(j, x_row(j))) by the calling thread alone; x_row may be y_row. Full blocks run
/// unguarded loops over local arrays (vectorized; x_row may alias y_row), the row's last block guarded ones.
template <class T, class XRow, class YRow, class Op>
KOKKOS_INLINE_FUNCTION void host_row_softmax(const XRow& x_row, const YRow& y_row, const Op& op) {
  constexpr int B = 64, Lanes = 16;
  const std::int64_t n = y_row.extent(0), blocks = (n + B - 1) / B;
  constexpr std::int64_t min_chunk_blocks = static_cast<std::int64_t>(kHostChunkBytes / sizeof(T) / B);
  std::int64_t chunk_blocks               = (blocks + kHostMaxChunks - 1) / kHostMaxChunks;
  chunk_blocks                            = chunk_blocks < min_chunk_blocks ? min_chunk_blocks : chunk_blocks;
  const std::int64_t chunk                = chunk_blocks * B;
  T chunk_max[kHostMaxChunks];
  RowStats<T> stats = RowStats<T>::identity();
  int c             = 0;
  for (std::int64_t c0 = 0; c0 < n; c0 += chunk, ++c) {
    const std::int64_t c1 = c0 + chunk < n ? c0 + chunk : n;
    // v into y, and its maximum (the order of a maximum with NaN is unspecified: NaN makes the row NaN
    // through the sum below whether or not it is taken as m).
    T m = -Infinity<T>::value;
    for (std::int64_t j0 = c0; j0 < c1; j0 += B) {
      T v[B];
      if (j0 + B <= c1) {
        for (int l = 0; l < B; ++l) v[l] = op(j0 + l, static_cast<T>(x_row(j0 + l)));
        for (int l = 0; l < B; ++l) y_row(j0 + l) = v[l];
        SOFTFUSE_IMPL_SIMD_MAX(m)
        for (int l = 0; l < B; ++l) m = v[l] > m ? v[l] : m;
      } else {
        for (std::int64_t j = j0; j < c1; ++j) {
          const T vj = op(j, static_cast<T>(x_row(j)));
          y_row(j)   = vj;
          m          = vj > m ? vj : m;
        }
      }
    }
    chunk_max[c]  = m;
    const T shift = m == -Infinity<T>::value ? T(0) : m;  // a chunk of -inf: exp(-inf - 0) = 0
    // exp(v - m) into y; per block a T partial of 4 terms per lane, then per lane in double.
    double lane_sum[Lanes] = {};
    for (std::int64_t j0 = c0; j0 < c1; j0 += B) {
      T e[B];
      if (j0 + B <= c1) {
        for (int l = 0; l < B; ++l) e[l] = row_exp_nonpositive(static_cast<T>(y_row(j0 + l)) - shift);
        for (int l = 0; l < B; ++l) y_row(j0 + l) = e[l];
        T part[Lanes];
        for (int w = 0; w < Lanes; ++w) part[w] = e[w];
        for (int l = Lanes; l < B; l += Lanes)
          for (int w = 0; w < Lanes; ++w) part[w] += e[l + w];
        for (int w = 0; w < Lanes; ++w) lane_sum[w] += static_cast<double>(part[w]);
      } else {
        for (std::int64_t j = j0; j < c1; ++j) {
          const T ej = row_exp_nonpositive(static_cast<T>(y_row(j)) - shift);
          y_row(j)   = ej;
          lane_sum[0] += static_cast<double>(ej);
        }
      }
    }
    double chunk_sum = 0;
    for (int w = 0; w < Lanes; ++w) chunk_sum += lane_sum[w];
    stats = RowStats<T>::combine(stats, {m, chunk_sum});
  }
  const T inv = stats.inverse_sum();
  c           = 0;
  for (std::int64_t c0 = 0; c0 < n; c0 += chunk, ++c) {
    const std::int64_t c1 = c0 + chunk < n ? c0 + chunk : n;
    const T scale         = row_exp(chunk_max[c] - stats.max) * inv;  // NaN where inv is
    for (std::int64_t j0 = c0; j0 < c1; j0 += B) {
      T e[B];
      if (j0 + B <= c1) {
        for (int l = 0; l < B; ++l) e[l] = static_cast<T>(y_row(j0 + l)) * scale;
        for (int l = 0; l < B; ++l) y_row(j0 + l) = e[l];
      } else {
        for (std::int64_t j = j0; j < c1; ++j) y_row(j) = static_cast<T>(y_row(j)) * scale;
      }
    }
  }
}

}  // namespace Impl
}  // namespace softfuse

#endif
