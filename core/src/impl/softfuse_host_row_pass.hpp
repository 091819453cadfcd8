#ifndef SOFTFUSE_IMPL_HOST_ROW_PASS_HPP
#define SOFTFUSE_IMPL_HOST_ROW_PASS_HPP

// The row pass of host CPUs (softfuse_team_config.hpp: the packed and team regimes on hosts), with one
// exponential per element. A thread takes a part of a row (the whole row in the packed regime, its share of
// the row in the team regime) into a buffer: per chunk of at least kHostChunkBytes (in L1 between its two
// steps) v = op(j, x(j)) goes to the buffer while its maximum m_c is found, then exp(v - m_c) replaces it and
// is summed (a T partial of 4 terms per SIMD lane, the sum in double). The write pass writes
// y = buffer * exp(m_c - max) / sum. A team's threads join their parts' statistics in one fixed order.
// The buffer is the thread's scratch (kHostRowBufferBytes, within a core's cache) where the part fits: x is
// read once and y written once, through streaming stores where y goes beyond the caches
// (softfuse_host_stream_store.hpp). Longer rows of the packed regime use y itself as the buffer: y is
// written twice, and read back from the cache levels the row fits in.
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

// Tunables: a chunk of at least kHostChunkBytes stays in L1 between its two steps; a part has at most
// kHostMaxChunks of them (their maxima live on the stack).
constexpr std::size_t kHostChunkBytes = 8192;
constexpr std::int64_t kHostMaxChunks = 512;

/// The elements of a chunk of a part of n elements: kHostChunkBytes, more where the part would have more than
/// kHostMaxChunks of them; whole blocks of 64.
template <class T>
KOKKOS_INLINE_FUNCTION std::int64_t host_chunk(const std::int64_t n) {
  constexpr std::int64_t min_chunk = static_cast<std::int64_t>(kHostChunkBytes / sizeof(T));
  const std::int64_t chunk         = ((n + kHostMaxChunks - 1) / kHostMaxChunks + 63) / 64 * 64;
  return chunk > min_chunk ? chunk : min_chunk;
}

/// A part's buffer: a thread's scratch, or (RowBuffer) the part of y it will be written to.
template <class T>
struct ScratchBuffer {
  T* data;
  KOKKOS_INLINE_FUNCTION T& operator()(const std::int64_t k) const { return data[k]; }
};
template <class YRow>
struct RowBuffer {
  YRow y;
  std::int64_t j0;
  KOKKOS_INLINE_FUNCTION auto& operator()(const std::int64_t k) const { return y(j0 + k); }
};

/// The statistics of v = op(j, x_row(j)) for j in [j0, j1), leaving exp(v - m_c) in buf(0 .. j1 - j0) and
/// the chunks' maxima m_c in chunk_max. Full blocks run unguarded loops over local arrays (vectorized), the
/// part's last block guarded ones. Where the buffer is y (x may be y), x(j) is read before y(j) is written.
template <class T, class XRow, class Op, class Buffer>
KOKKOS_INLINE_FUNCTION RowStats<T> host_part_stats(const XRow& x_row, const std::int64_t j0, const std::int64_t j1,
                                                   const Op& op, const Buffer& buf, T* chunk_max) {
  constexpr int B = 64, Lanes = 16;
  const std::int64_t chunk = host_chunk<T>(j1 - j0);
  RowStats<T> stats        = RowStats<T>::identity();
  int c                    = 0;
  for (std::int64_t c0 = j0; c0 < j1; c0 += chunk, ++c) {
    const std::int64_t len = c0 + chunk < j1 ? chunk : j1 - c0;
    const std::int64_t b0  = c0 - j0;  // the chunk's first element in the buffer
    // v into the buffer, and its maximum (the order of a maximum with NaN is unspecified: NaN makes the row
    // NaN through the sum below whether or not it is taken as m).
    T m = -Infinity<T>::value;
    for (std::int64_t k0 = 0; k0 < len; k0 += B) {
      if (k0 + B <= len) {
        T v[B];
        for (int l = 0; l < B; ++l) v[l] = op(c0 + k0 + l, static_cast<T>(x_row(c0 + k0 + l)));
        for (int l = 0; l < B; ++l) buf(b0 + k0 + l) = v[l];
        SOFTFUSE_IMPL_SIMD_MAX(m)
        for (int l = 0; l < B; ++l) m = v[l] > m ? v[l] : m;
      } else {
        for (std::int64_t k = k0; k < len; ++k) {
          const T vk = op(c0 + k, static_cast<T>(x_row(c0 + k)));
          buf(b0 + k) = vk;
          m          = vk > m ? vk : m;
        }
      }
    }
    chunk_max[c]  = m;
    const T shift = m == -Infinity<T>::value ? T(0) : m;  // a chunk of -inf: exp(-inf - 0) = 0
    // exp(v - m) into the buffer; per block a T partial of 4 terms per lane, then per lane in double.
    double lane_sum[Lanes] = {};
    for (std::int64_t k0 = 0; k0 < len; k0 += B) {
      if (k0 + B <= len) {
        T e[B];
        for (int l = 0; l < B; ++l) e[l] = row_exp_nonpositive(static_cast<T>(buf(b0 + k0 + l)) - shift);
        for (int l = 0; l < B; ++l) buf(b0 + k0 + l) = e[l];
        T part[Lanes];
        for (int w = 0; w < Lanes; ++w) part[w] = e[w];
        for (int l = Lanes; l < B; l += Lanes)
          for (int w = 0; w < Lanes; ++w) part[w] += e[l + w];
        for (int w = 0; w < Lanes; ++w) lane_sum[w] += static_cast<double>(part[w]);
      } else {
        for (std::int64_t k = k0; k < len; ++k) {
          const T ek  = row_exp_nonpositive(static_cast<T>(buf(b0 + k)) - shift);
          buf(b0 + k) = ek;
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

/// y_row(j) = buf(j - j0) * exp(m_c - max) / sum for j in [j0, j1), the row's statistics `row` and the
/// chunks' maxima from host_part_stats; streaming stores where `stream` and y_row is contiguous (a RowBuffer
/// is then contiguous too).
template <class T, class YRow, class Buffer>
KOKKOS_INLINE_FUNCTION void host_part_write(const YRow& y_row, const std::int64_t j0, const std::int64_t j1,
                                            const Buffer& buf, const T* chunk_max, const RowStats<T>& row,
                                            const bool stream) {
  const std::int64_t chunk = host_chunk<T>(j1 - j0);
  const T inv              = row.inverse_sum();
  const bool contiguous    = y_row.stride(0) == 1;
  int c                    = 0;
  for (std::int64_t c0 = j0; c0 < j1; c0 += chunk, ++c) {
    const std::int64_t c1 = c0 + chunk < j1 ? c0 + chunk : j1;
    const T scale         = row_exp(chunk_max[c] - row.max) * inv;  // NaN where inv is
    if (contiguous) {
      host_scaled_store(&y_row(c0), &buf(c0 - j0), c1 - c0, scale, stream);
    } else {
      for (std::int64_t j = c0; j < c1; ++j) y_row(j) = static_cast<T>(buf(j - j0)) * scale;
    }
  }
  if (stream) host_stream_fence();
}

template <class ExecSpace, class T>
using host_buffer_t = Kokkos::View<T*, typename ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class ExecSpace, class T>
using parts_t = Kokkos::View<RowStats<T>*, typename ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

/// Packed on hosts: team (one thread) t owns row first_row + t, buffered in its scratch (Scratch) or in y.
template <class ExecSpace, class XView, class YView, class Op, bool Scratch>
struct HostRowsFunctor {
  using member_type = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using T           = typename YView::non_const_value_type;

  XView x;
  YView y;
  Op op;
  std::int64_t first_row;
  bool stream;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const std::int64_t i = first_row + team.league_rank(), n = y.extent(1);
    const auto x_row     = Kokkos::subview(x, i, Kokkos::ALL);
    const auto y_row     = Kokkos::subview(y, i, Kokkos::ALL);
    T chunk_max[kHostMaxChunks];
    if constexpr (Scratch) {
      const ScratchBuffer<T> buf{host_buffer_t<ExecSpace, T>(team.thread_scratch(1), n).data()};
      host_part_write<T>(y_row, 0, n, buf, chunk_max, host_part_stats<T>(x_row, 0, n, op, buf, chunk_max), stream);
    } else {
      const RowBuffer<decltype(y_row)> buf{y_row, 0};
      host_part_write<T>(y_row, 0, n, buf, chunk_max, host_part_stats<T>(x_row, 0, n, op, buf, chunk_max), false);
    }
  }
};

/// Team on hosts: team t owns row first_row + t, its thread r the part [r * part, (r + 1) * part).
template <class ExecSpace, class XView, class YView, class Op>
struct HostTeamRowFunctor {
  using member_type = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using T           = typename YView::non_const_value_type;

  XView x;
  YView y;
  Op op;
  std::int64_t first_row, part;
  bool stream;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const std::int64_t i = first_row + team.league_rank(), n = y.extent(1);
    const std::int64_t begin = team.team_rank() * part, j0 = begin < n ? begin : n, j1 = j0 + part < n ? j0 + part : n;
    const ScratchBuffer<T> buf{host_buffer_t<ExecSpace, T>(team.thread_scratch(1), part).data()};
    const parts_t<ExecSpace, T> parts(team.team_scratch(0), team.team_size());
    T chunk_max[kHostMaxChunks];
    parts(team.team_rank()) = host_part_stats<T>(Kokkos::subview(x, i, Kokkos::ALL), j0, j1, op, buf, chunk_max);
    team.team_barrier();
    RowStats<T> row = RowStats<T>::identity();
    for (int r = 0; r < team.team_size(); ++r) row = RowStats<T>::combine(row, parts(r));
    team.team_barrier();  // every thread has read parts before the team's next row overwrites them
    host_part_write<T>(Kokkos::subview(y, i, Kokkos::ALL), j0, j1, buf, chunk_max, row, stream);
  }
};

/// The packed and team regimes on hosts (plan from plan_rows): one league of teams of plan.team_size
/// threads, one row per team, each thread with a buffer of plan.chunk elements (packed with chunk 0: in y).
template <class ExecSpace, class XView, class YView, class Op>
void host_row_softmax(const ExecSpace& space, const XView& x, const YView& y, const Op& op, const RowPlan& plan,
                      const char* label) {
  using T                 = typename YView::non_const_value_type;
  using policy_type       = Kokkos::TeamPolicy<ExecSpace>;
  const std::int64_t rows = y.extent(0);
  const std::size_t buffer_bytes = host_buffer_t<ExecSpace, T>::shmem_size(plan.chunk);
  for (std::int64_t r0 = 0; r0 < rows; r0 += INT_MAX) {
    const int league = static_cast<int>(std::min<std::int64_t>(rows - r0, INT_MAX));
    policy_type policy(space, league, plan.team_size);
    policy.set_scratch_size(1, Kokkos::PerThread(buffer_bytes));
    if (plan.regime == RowRegime::packed && plan.chunk == 0) {
      Kokkos::parallel_for(label, policy, HostRowsFunctor<ExecSpace, XView, YView, Op, false>{x, y, op, r0, false});
    } else if (plan.regime == RowRegime::packed) {
      Kokkos::parallel_for(label, policy, HostRowsFunctor<ExecSpace, XView, YView, Op, true>{x, y, op, r0, plan.stream});
    } else {
      policy.set_scratch_size(0, Kokkos::PerTeam(parts_t<ExecSpace, T>::shmem_size(plan.team_size)));
      Kokkos::parallel_for(label, policy,
                           HostTeamRowFunctor<ExecSpace, XView, YView, Op>{x, y, op, r0, plan.chunk, plan.stream});
    }
  }
}

}  // namespace Impl
}  // namespace softfuse

#endif
