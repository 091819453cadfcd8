#ifndef SOFTFUSE_IMPL_HOST_ROW_PASS_HPP
#define SOFTFUSE_IMPL_HOST_ROW_PASS_HPP

// The row pass of host CPUs (softfuse_team_config.hpp: the packed regime on hosts), with one exponential per
// element: each thread takes blocks of whole rows. Per chunk of at least kHostChunkBytes (in L1 between its
// two steps) v = op(j, x(j)) goes to the row's buffer while its maximum m_c is found, then exp(v - m_c)
// replaces it and is summed (a T partial of 4 terms per SIMD lane, the sum in double). The write pass writes
// y = buffer * exp(m_c - max) / sum.
// Where x and y go beyond the caches, the buffer is the thread's scratch and y is written once, through
// streaming stores (softfuse_host_stream_store.hpp): a copy's memory traffic. Elsewhere y itself is the
// buffer, read back from the cache.
//
// Semantics as RowStats: NaN makes the row NaN (its exp is NaN), +inf too (max = +inf), a row of -inf
// is NaN (sum 0), a chunk of -inf in a finite row gives 0 (its m_c is taken as 0, exp(-inf) = 0).

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>

#include "softfuse_host_stream_store.hpp"
#include "softfuse_row_exp.hpp"
#include "softfuse_row_stats.hpp"
#include "softfuse_team_config.hpp"

namespace softfuse {
namespace Impl {

// Tunables: a chunk of at least kHostChunkBytes stays in L1 between its two steps; a row has at most
// kHostMaxChunks of them (their maxima live on the stack).
constexpr std::size_t kHostChunkBytes = 8192;
constexpr std::int64_t kHostMaxChunks = 512;

/// The elements of a chunk of a row of n elements: kHostChunkBytes, more where the row would have more than
/// kHostMaxChunks of them; whole blocks of 64.
template <class T>
KOKKOS_INLINE_FUNCTION std::int64_t host_chunk(const std::int64_t n) {
  constexpr std::int64_t min_chunk = static_cast<std::int64_t>(kHostChunkBytes / sizeof(T));
  const std::int64_t chunk         = ((n + kHostMaxChunks - 1) / kHostMaxChunks + 63) / 64 * 64;
  return chunk > min_chunk ? chunk : min_chunk;
}

/// A row's buffer: a thread's scratch, or (RowBuffer) y itself.
template <class T>
struct ScratchBuffer {
  T* data;
  KOKKOS_INLINE_FUNCTION T& operator()(const std::int64_t k) const { return data[k]; }
};
template <class YRow>
struct RowBuffer {
  YRow y;
  KOKKOS_INLINE_FUNCTION auto& operator()(const std::int64_t k) const { return y(k); }
};

/// The statistics of v = op(j, x_row(j)), leaving exp(v - m_c) in buf and the chunks' maxima m_c in
/// chunk_max. Full blocks run unguarded loops over local arrays (vectorized), the row's last block guarded
/// ones. Where the buffer is y (x may be y), x(j) is read before y(j) is written.
template <class T, class XRow, class Op, class Buffer>
KOKKOS_INLINE_FUNCTION RowStats<T> host_row_stats(const XRow& x_row, const Op& op, const Buffer& buf, T* chunk_max) {
  constexpr int Lanes = 16, B = 4 * Lanes;  // the exp loop below takes 4 elements per lane
  const std::int64_t n = x_row.extent(0), chunk = host_chunk<T>(n);
  RowStats<T> stats = RowStats<T>::identity();
  int c             = 0;
  for (std::int64_t c0 = 0; c0 < n; c0 += chunk, ++c) {
    const std::int64_t len = c0 + chunk < n ? chunk : n - c0;
    // v into the buffer, and its maximum (the order of a maximum with NaN is unspecified: NaN makes the row
    // NaN through the sum below whether or not it is taken as m). A maximum per lane over the chunk, joined once
    // at its end, in one loop over the lanes as the exponentials below: a maximum reduced per block cost a
    // horizontal reduction per 64 elements.
    T lane_max[Lanes];
    for (int w = 0; w < Lanes; ++w) lane_max[w] = -Infinity<T>::value;
    for (std::int64_t k0 = 0; k0 < len; k0 += B) {
      if (k0 + B <= len) {
        SOFTFUSE_IMPL_SIMD
        for (int w = 0; w < Lanes; ++w) {
          const std::int64_t j = c0 + k0 + w;
          const T v0           = op(j, static_cast<T>(x_row(j)));
          const T v1           = op(j + Lanes, static_cast<T>(x_row(j + Lanes)));
          const T v2           = op(j + 2 * Lanes, static_cast<T>(x_row(j + 2 * Lanes)));
          const T v3           = op(j + 3 * Lanes, static_cast<T>(x_row(j + 3 * Lanes)));
          buf(j)               = v0;
          buf(j + Lanes)       = v1;
          buf(j + 2 * Lanes)   = v2;
          buf(j + 3 * Lanes)   = v3;
          const T m01          = v0 > v1 ? v0 : v1;
          const T m23          = v2 > v3 ? v2 : v3;
          const T m            = m01 > m23 ? m01 : m23;
          lane_max[w]          = m > lane_max[w] ? m : lane_max[w];
        }
      } else {
        for (std::int64_t k = k0; k < len; ++k) {
          const T vk  = op(c0 + k, static_cast<T>(x_row(c0 + k)));
          buf(c0 + k) = vk;
          lane_max[0] = vk > lane_max[0] ? vk : lane_max[0];
        }
      }
    }
    T m = -Infinity<T>::value;
    for (int w = 0; w < Lanes; ++w) m = lane_max[w] > m ? lane_max[w] : m;
    chunk_max[c]  = m;
    const T shift = m == -Infinity<T>::value ? T(0) : m;  // a chunk of -inf: exp(-inf - 0) = 0
    // exp(v - m) into the buffer; per block a T partial of 4 terms per lane, then per lane in double. One
    // loop over the lanes, so that the compiler keeps each lane's partial and sum in vector registers.
    double lane_sum[Lanes] = {};
    for (std::int64_t k0 = 0; k0 < len; k0 += B) {
      if (k0 + B <= len) {
        SOFTFUSE_IMPL_SIMD
        for (int w = 0; w < Lanes; ++w) {
          const std::int64_t j = c0 + k0 + w;
          const T e0           = row_exp_nonpositive(static_cast<T>(buf(j)) - shift);
          const T e1           = row_exp_nonpositive(static_cast<T>(buf(j + Lanes)) - shift);
          const T e2           = row_exp_nonpositive(static_cast<T>(buf(j + 2 * Lanes)) - shift);
          const T e3           = row_exp_nonpositive(static_cast<T>(buf(j + 3 * Lanes)) - shift);
          buf(j)               = e0;
          buf(j + Lanes)       = e1;
          buf(j + 2 * Lanes)   = e2;
          buf(j + 3 * Lanes)   = e3;
          lane_sum[w] += static_cast<double>(((e0 + e1) + e2) + e3);
        }
      } else {
        for (std::int64_t k = k0; k < len; ++k) {
          const T ek  = row_exp_nonpositive(static_cast<T>(buf(c0 + k)) - shift);
          buf(c0 + k) = ek;
          lane_sum[0] += static_cast<double>(ek);
        }
      }
    }
    double chunk_sum = 0;
    for (int w = 0; w < Lanes; ++w) chunk_sum += lane_sum[w];
    stats = RowStats<T>::combine(stats, {m, chunk_sum});
  }
  return stats;
}

/// y_row(j) = buf(j) * exp(m_c - max) / sum, the row's statistics `row` and the chunks' maxima from
/// host_row_stats; streaming stores where `stream` and y_row is contiguous (a RowBuffer is then contiguous too),
/// to be fenced (host_stream_fence) before the kernel ends.
template <class T, class YRow, class Buffer>
KOKKOS_INLINE_FUNCTION void host_row_write(const YRow& y_row, const Buffer& buf, const T* chunk_max,
                                           const RowStats<T>& row, const bool stream) {
  const std::int64_t n = y_row.extent(0), chunk = host_chunk<T>(n);
  const T inv           = row.inverse_sum();
  const bool contiguous = y_row.stride(0) == 1;
  // Last chunk first: those host_row_stats wrote last are still in the core's cache where the row is not.
  for (std::int64_t c = (n + chunk - 1) / chunk - 1; c >= 0; --c) {
    const std::int64_t c0 = c * chunk, c1 = c0 + chunk < n ? c0 + chunk : n;
    const T scale = row_exp(chunk_max[c] - row.max) * inv;  // NaN where inv is
    if (contiguous) {
      host_scaled_store(&y_row(c0), &buf(c0), c1 - c0, scale, stream);
    } else {
      for (std::int64_t j = c0; j < c1; ++j) y_row(j) = static_cast<T>(buf(j)) * scale;
    }
  }
}

/// Packed on hosts: team (one thread) t owns rows [first_row + t * block, first_row + (t + 1) * block), buffered
/// in its scratch (Scratch) or in y; its streaming stores fenced once.
template <class ExecSpace, class XView, class YView, class Op, bool Scratch>
struct HostRowsFunctor {
  using member_type = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using T           = typename YView::non_const_value_type;

  XView x;
  YView y;
  Op op;
  std::int64_t first_row, block;
  bool stream;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const std::int64_t n = y.extent(1), begin = first_row + team.league_rank() * block;
    const std::int64_t end = begin + block < std::int64_t(y.extent(0)) ? begin + block : std::int64_t(y.extent(0));
    T chunk_max[kHostMaxChunks];
    T* const scratch = Scratch ? row_cache_t<ExecSpace, T>(team.thread_scratch(1), n).data() : nullptr;
    for (std::int64_t i = begin; i < end; ++i) {
      const auto x_row = Kokkos::subview(x, i, Kokkos::ALL);
      const auto y_row = Kokkos::subview(y, i, Kokkos::ALL);
      if constexpr (Scratch) {
        const ScratchBuffer<T> buf{scratch};
        host_row_write<T>(y_row, buf, chunk_max, host_row_stats<T>(x_row, op, buf, chunk_max), stream);
      } else {
        const RowBuffer<decltype(y_row)> buf{y_row};
        host_row_write<T>(y_row, buf, chunk_max, host_row_stats<T>(x_row, op, buf, chunk_max), false);
      }
    }
    if (Scratch && stream) host_stream_fence();
  }
};

/// The packed regime on hosts (plan from plan_rows): blocks of plan.group_rows rows, one per thread at a time,
/// each thread with a buffer of plan.chunk elements (0: in y).
template <class ExecSpace, class XView, class YView, class Op>
void host_row_softmax(const ExecSpace& space, const XView& x, const YView& y, const Op& op, const RowPlan& plan,
                      const char* label) {
  using T                 = typename YView::non_const_value_type;
  using policy_type       = Kokkos::TeamPolicy<ExecSpace>;
  const std::int64_t rows = y.extent(0), block = plan.group_rows > 0 ? plan.group_rows : 1;
  const std::int64_t blocks = (rows + block - 1) / block;
  for (std::int64_t b0 = 0; b0 < blocks; b0 += INT_MAX) {
    const int league = static_cast<int>(std::min<std::int64_t>(blocks - b0, INT_MAX));
    policy_type policy(space, league, 1);
    if (plan.chunk > 0) {
      policy.set_scratch_size(1, Kokkos::PerThread(row_cache_t<ExecSpace, T>::shmem_size(plan.chunk)));
      Kokkos::parallel_for(
          label, policy, HostRowsFunctor<ExecSpace, XView, YView, Op, true>{x, y, op, b0 * block, block, plan.stream});
    } else {
      Kokkos::parallel_for(label, policy,
                           HostRowsFunctor<ExecSpace, XView, YView, Op, false>{x, y, op, b0 * block, block, false});
    }
  }
}

}  // namespace Impl
}  // namespace softfuse

#endif
