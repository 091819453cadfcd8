#ifndef SOFTFUSE_IMPL_ROW_PASS_HPP
#define SOFTFUSE_IMPL_ROW_PASS_HPP

// The two passes over a row (or a chunk of one) that every portable row kernel is made of, for any group of
// cooperating workers: a whole team (TeamThreadRange: TeamSoftmax, the team and split regimes) or the vector
// lanes of one team thread (ThreadVectorRange: the packed regime). Rows are indexed only through their Views,
// so any layout works.
//
// Workers take blocks of B elements (RowBlocks): on GPUs B loads in flight per worker, interleaved so each
// load instruction of a warp is coalesced; on CPUs B consecutive elements, so each worker's inner loops
// vectorize. Each worker later reads back exactly the cache entries it wrote (same partition), so no
// barrier separates the passes.

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "softfuse_row_exp.hpp"
#include "softfuse_row_stats.hpp"
#include "softfuse_team_config.hpp"

namespace softfuse {
namespace Impl {

struct NoCache {};

struct IdentityOp {
  template <class I, class T>
  KOKKOS_INLINE_FUNCTION T operator()(const I, const T x) const {
    return x;
  }
};

/// op applied to a chunk starting at column `offset` of its row: op sees the row's column indices.
template <class Op>
struct ShiftedOp {
  Op op;
  std::int64_t offset;
  template <class T>
  KOKKOS_INLINE_FUNCTION T operator()(const std::int64_t j, const T x) const {
    return op(j + offset, x);
  }
};

/// The workers of a team: all its threads; Lanes > 0: a team of Lanes threads, known at compile time.
template <class Member, int Lanes = 0>
struct TeamWorkers {
  static constexpr int fixed_count = Lanes;
  const Member& team;
  KOKKOS_INLINE_FUNCTION std::int64_t count() const { return Lanes ? Lanes : team.team_size(); }
  KOKKOS_INLINE_FUNCTION auto range(const std::int64_t n) const { return Kokkos::TeamThreadRange(team, n); }
};

/// The workers of one team thread: its `lanes` vector lanes.
template <class Member>
struct VectorWorkers {
  static constexpr int fixed_count = 0;
  const Member& team;
  int lanes;
  KOKKOS_INLINE_FUNCTION std::int64_t count() const { return lanes; }
  KOKKOS_INLINE_FUNCTION auto range(const std::int64_t n) const { return Kokkos::ThreadVectorRange(team, n); }
};

/// Kokkos reducer of a maximum whose identity is -inf (Kokkos::Max starts from the lowest finite value).
template <class T>
struct MaxWithInfinity {
  using reducer          = MaxWithInfinity;
  using value_type       = T;
  using result_view_type = Kokkos::View<value_type, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  value_type& value;

  KOKKOS_INLINE_FUNCTION explicit MaxWithInfinity(value_type& v) : value(v) {}
  KOKKOS_INLINE_FUNCTION void join(value_type& dst, const value_type& src) const { dst = src > dst ? src : dst; }
#if KOKKOS_VERSION < 40000
  KOKKOS_INLINE_FUNCTION void join(volatile value_type& dst, const volatile value_type& src) const {
    const value_type a = dst, b = src;
    dst = b > a ? b : a;
  }
#endif
  KOKKOS_INLINE_FUNCTION void init(value_type& v) const { v = -Infinity<T>::value; }
  KOKKOS_INLINE_FUNCTION value_type& reference() const { return value; }
  KOKKOS_INLINE_FUNCTION result_view_type view() const { return result_view_type(&value); }
  KOKKOS_INLINE_FUNCTION bool references_scalar() const { return true; }
};

/// The statistics of a row whose workers each hold the statistics of their part (`mine`), for every worker:
/// the largest maximum, then the sum of the parts' sums rescaled to it. Two reductions of one number each
/// instead of one of (max, sum) pairs, whose join costs two exponentials at every level of the tree. Every
/// worker contributes once; the same team shape gives the same bits.
template <class T, class Workers>
KOKKOS_INLINE_FUNCTION RowStats<T> join_workers(const Workers& workers, const RowStats<T>& mine) {
  T max = -Infinity<T>::value;
  Kokkos::parallel_reduce(
      workers.range(workers.count()), [&](const std::int64_t, T& m) { m = mine.max > m ? mine.max : m; },
      MaxWithInfinity<T>(max));
  double sum = 0;
  Kokkos::parallel_reduce(
      workers.range(workers.count()),
      [&](const std::int64_t, double& s) {
        // equal maxima (a part of -inf in a row of -inf included) scale by exactly 1
        s += mine.max == max ? mine.sum : mine.sum * static_cast<double>(row_exp(mine.max - max));
      },
      sum);
  return {max, sum};
}

/// v = op(j, x_row(j)) for the block of `len` elements at j0, j0 + dj, ..., padded with -inf to B.
template <class T, int B, class XRow, class Op>
KOKKOS_INLINE_FUNCTION void load_block_padded(const XRow& x_row, const Op& op, const std::int64_t j0,
                                              const std::int64_t dj, const int len, T (&v)[B]) {
  if (len == B) {
    for (int l = 0; l < B; ++l) v[l] = op(j0 + l * dj, static_cast<T>(x_row(j0 + l * dj)));
  } else {
    for (int l = 0; l < B; ++l)
      v[l] = l < len ? op(j0 + l * dj, static_cast<T>(x_row(j0 + l * dj))) : -Infinity<T>::value;
  }
}

/// What a worker carries from one row to the next of the same length and op: nothing, or (RowAhead, one lane per
/// thread) its first block of the next row, loaded with the current row's last block so that the load is in flight
/// while the team joins the current row's statistics (rolling team rows).
template <class T, int B>
struct NoRowAhead {
  KOKKOS_INLINE_FUNCTION bool take(T (&)[B]) { return false; }
  template <class Blocks, class Op>
  KOKKOS_INLINE_FUNCTION void load(const Blocks&, const std::int64_t, const Op&) {}
};

template <class XView, class T, int B>
struct RowAhead {
  XView x;
  std::int64_t next = -1;  // the row to load ahead from, none where < 0
  bool loaded       = false;
  T v[B];

  KOKKOS_INLINE_FUNCTION bool take(T (&a)[B]) {
    if (!loaded) return false;
    for (int l = 0; l < B; ++l) a[l] = v[l];
    loaded = false;
    return true;
  }
  template <class Blocks, class Op>
  KOKKOS_INLINE_FUNCTION void load(const Blocks& blocks, const std::int64_t lane, const Op& op) {
    const std::int64_t j0 = blocks.begin(lane);
    if (next < 0 || j0 >= blocks.n) return;
    load_block_padded<T, B>(Kokkos::subview(x, next, Kokkos::ALL), op, j0, blocks.spacing(), blocks.length(j0), v);
    loaded = true;
  }
};

/// A worker's interleaved blocks of x_row (GPUs), lane `lane` of `blocks`: each loaded padded with -inf and handed to
/// add(j0, len, v). Pipelined: the worker loads its next block before add runs on the current one, so its loads stay
/// in flight while it computes (twice the registers for values). `ahead`: the first block may have been loaded
/// already, and the next row's is loaded with the last.
template <class T, int B, bool Pipelined, int Lanes, class XRow, class Op, class Add, class Ahead = NoRowAhead<T, B>>
KOKKOS_INLINE_FUNCTION void for_lane_blocks(const RowBlocks<B, true, Lanes>& blocks, const std::int64_t lane,
                                            const XRow& x_row, const Op& op, const Add& add, Ahead&& ahead = Ahead()) {
  const std::int64_t n = x_row.extent(0), dj = blocks.spacing();
  std::int64_t j0 = blocks.begin(lane);
  if (j0 >= n) return;
  int len = blocks.length(j0);
  T a[B], b[B];  // the current block and the next, their roles swapped each step (no copy between them)
  if (!ahead.take(a)) load_block_padded<T, B>(x_row, op, j0, dj, len, a);
  // one block: loads the next into `next` (ahead of add where Pipelined), adds `cur`; false after the last
  const auto step = [&](const T(&cur)[B], T(&next)[B]) {
    const std::int64_t j1 = j0 + blocks.step();
    const int next_len    = j1 < n ? blocks.length(j1) : 0;
    if (Pipelined && next_len > 0) load_block_padded<T, B>(x_row, op, j1, dj, next_len, next);
    if (next_len == 0) ahead.load(blocks, lane, op);
    add(j0, len, cur);
    if (next_len == 0) return false;
    if (!Pipelined) load_block_padded<T, B>(x_row, op, j1, dj, next_len, next);
    j0  = j1;
    len = next_len;
    return true;
  };
  while (step(a, b) && step(b, a)) {
  }
}

/// Max and sum of exp(v - max) over v = op(j, x_row(j)), every worker getting the result; keeps v in
/// `cache` (a View of the row's extent, or NoCache).
/// Interleaved (GPUs): one lane per worker, so a lane's statistics stay in its worker and join_workers joins
/// them; a worker's last, partial block is padded with -inf (exp(-inf - max) = 0 adds nothing), so every
/// block takes the same unguarded arithmetic and only loads and stores beyond the row are guarded.
/// Pipelined (interleaved only): a worker loads its next block before it stores and sums the current one, so
/// its loads stay in flight while it computes (twice the registers for values).
template <class T, int B, bool Interleaved, bool Pipelined = false, class Workers, class XRow, class Cache, class Op>
KOKKOS_INLINE_FUNCTION RowStats<T> row_stats(const Workers& workers, const XRow& x_row, const Cache& cache,
                                             const Op& op) {
  constexpr bool cached = Kokkos::is_view<Cache>::value;
  const std::int64_t n  = x_row.extent(0);
  const RowBlocks<B, Interleaved, Interleaved ? Workers::fixed_count : 0> blocks(n, workers.count());
  const std::int64_t dj = blocks.spacing();
  const auto lane_stats = [&](const std::int64_t lane, RowStats<T>& acc) {
    for (std::int64_t j0 = blocks.begin(lane); j0 < n; j0 += blocks.step()) {
      const int len = blocks.length(j0);
      T v[B];          // compile-time indices only (guarded by l < len), so GPUs keep it in registers
      if (len == B) {  // unguarded: host compilers vectorize it without masks
        for (int l = 0; l < B; ++l) v[l] = op(j0 + l * dj, static_cast<T>(x_row(j0 + l * dj)));
        if constexpr (cached)
          for (int l = 0; l < B; ++l) cache(j0 + l * dj) = v[l];
      } else {
        for (int l = 0; l < B; ++l)
          if (l < len) v[l] = op(j0 + l * dj, static_cast<T>(x_row(j0 + l * dj)));
        if constexpr (cached)
          for (int l = 0; l < B; ++l)
            if (l < len) cache(j0 + l * dj) = v[l];
        if constexpr (Interleaved) {
          for (int l = 0; l < B; ++l)
            if (l >= len) v[l] = -Infinity<T>::value;
          acc.add_block(v, B);
          continue;
        }
      }
      acc.add_block(v, len);
    }
  };
  if constexpr (Interleaved) {
    RowStats<T> mine = RowStats<T>::identity();
    Kokkos::parallel_for(workers.range(blocks.lanes()), [&](const std::int64_t lane) {
      if constexpr (Pipelined)
        for_lane_blocks<T, B, true, Workers::fixed_count>(blocks, lane, x_row, op,
                                                          [&](const std::int64_t j0, const int len, const T(&v)[B]) {
                                                            if constexpr (cached)
                                                              for (int l = 0; l < B; ++l)
                                                                if (len == B || l < len) cache(j0 + l * dj) = v[l];
                                                            mine.add_block(v, B);
                                                          });
      else
        lane_stats(lane, mine);
    });
    return join_workers(workers, mine);
  } else {
    RowStats<T> stats;
    Kokkos::parallel_reduce(workers.range(blocks.lanes()), lane_stats, RowStatsReducer<T>(stats));
    return stats;
  }
}

/// y_row(j) = exp(v_j - max) * inv, v_j from `cache` (filled by row_stats with the same workers) or
/// recomputed as op(j, x_row(j)).
template <class T, int B, bool Interleaved, class Workers, class XRow, class YRow, class Cache, class Op>
KOKKOS_INLINE_FUNCTION void row_write(const Workers& workers, const XRow& x_row, const YRow& y_row, const Cache& cache,
                                      const Op& op, const T max, const T inv) {
  constexpr bool cached = Kokkos::is_view<Cache>::value;
  const std::int64_t n  = y_row.extent(0);
  const RowBlocks<B, Interleaved, Interleaved ? Workers::fixed_count : 0> blocks(n, workers.count());
  const std::int64_t dj = blocks.spacing();
  // The cache holds the values the maximum was taken over, so v - max <= 0 there. op recomputed here may
  // round differently from the statistics pass (other vectorization or contraction): v - max > 0 is clamped
  // so that no element exceeds 1. NaN stays NaN.
  const auto value = [&](const std::int64_t j) {
    if constexpr (cached)
      return static_cast<T>(cache(j));
    else
      return op(j, static_cast<T>(x_row(j)));
  };
  const auto result = [&](const T v) {
    const T d = v - max;
    return row_exp(cached || !(d > T(0)) ? d : T(0)) * inv;
  };
  Kokkos::parallel_for(workers.range(blocks.lanes()), [&](const std::int64_t lane) {
    for (std::int64_t j0 = blocks.begin(lane); j0 < n; j0 += blocks.step()) {
      const int len = blocks.length(j0);
      if (len == B) {
        // All B loads before the first store: y may alias x (in place), so the compiler may not move a load
        // above a store itself, and one load at a time would be in flight.
        T v[B];
        for (int l = 0; l < B; ++l) v[l] = value(j0 + l * dj);
        for (int l = 0; l < B; ++l) y_row(j0 + l * dj) = result(v[l]);
      } else {
        for (int l = 0; l < len; ++l) y_row(j0 + l * dj) = result(value(j0 + l * dj));
      }
    }
  });
}

/// Held rows on GPUs (interleaved blocks, the row held in `cache`): one exponential per element. The statistics
/// pass keeps e = exp(v - s) in the cache, s its worker's shift: the worker's first finite block maximum, raised to a
/// block's maximum (and the worker's held exponentials rescaled) only where that exceeds s by more than
/// kHeldShiftSlack, so e stays below exp(kHeldShiftSlack) and s within kHeldShiftSlack of the worker's maximum. The
/// write pass is y = e * (exp(s - max) / sum): one exponential per worker instead of one per element. A worker of
/// -inf and NaN only keeps s = -inf and exp(v) (0 or NaN), which its factor 0 keeps at 0 (or NaN).
/// x - max becomes (v - s) + (s - max): two roundings instead of one (docs/portable_path.md).
constexpr int kHeldShiftSlack = 16;

/// y_row(j) = e_j * factor over a worker's block of `len` elements at j0, j0 + dj, ..., e_j from `cache`: all loads
/// before the first store where the block is full.
template <class T, int B, class YRow, class Cache>
KOKKOS_INLINE_FUNCTION void write_held_block(const YRow& y_row, const Cache& cache, const std::int64_t j0,
                                             const std::int64_t dj, const int len, const T factor) {
  if (len == B) {
    T e[B];
    for (int l = 0; l < B; ++l) e[l] = cache(j0 + l * dj);
    for (int l = 0; l < B; ++l) y_row(j0 + l * dj) = e[l] * factor;
  } else {
    for (int l = 0; l < len; ++l) y_row(j0 + l * dj) = cache(j0 + l * dj) * factor;
  }
}

/// What held_row_stats does with a block's cache entries before they take the row's exponentials: nothing, or
/// (HeldRowFlush) write them out as the previous row held there, y_row = e * factor (rolling team rows).
struct NoHeldFlush {
  template <class T, int B, class Cache>
  KOKKOS_INLINE_FUNCTION void write(const Cache&, const std::int64_t, const std::int64_t, const int) const {}
};

template <class YRow, class T>
struct HeldRowFlush {
  YRow y_row;
  T factor;
  template <class, int B, class Cache>
  KOKKOS_INLINE_FUNCTION void write(const Cache& cache, const std::int64_t j0, const std::int64_t dj,
                                    const int len) const {
    write_held_block<T, B>(y_row, cache, j0, dj, len, factor);
  }
};

/// The statistics of a held row, every worker getting the row's, and its own shift in `shift` (for held_row_write).
/// Pipelined: a worker loads its next block before it computes the current one. `flush`: what becomes of the
/// cache entries of each block before the row's take their place (HeldRowFlush: the previous row of the same
/// length, held by the same workers, written out). `ahead`: see for_lane_blocks.
template <class T, int B, bool Pipelined, class Workers, class XRow, class Cache, class Op, class Flush = NoHeldFlush,
          class Ahead = NoRowAhead<T, B>>
KOKKOS_INLINE_FUNCTION RowStats<T> held_row_stats(const Workers& workers, const XRow& x_row, const Cache& cache,
                                                  const Op& op, T& shift, const Flush& flush = Flush(),
                                                  Ahead&& ahead = Ahead()) {
  const std::int64_t n = x_row.extent(0);
  const RowBlocks<B, true, Workers::fixed_count> blocks(n, workers.count());
  const std::int64_t dj = blocks.spacing();
  T max = -Infinity<T>::value, s = -Infinity<T>::value;
  double sum           = 0;  // of the worker's e = exp(v - s)
  const auto add_block = [&](const std::int64_t lane, const std::int64_t j0, const int len, const T(&v)[B]) {
    flush.template write<T, B>(cache, j0, dj, len);
    // fmax ignores NaN (it poisons the sum) in one instruction; the maxima start at -inf, never NaN
    T block_max[2] = {-Infinity<T>::value, -Infinity<T>::value};
    for (int l = 0; l < B; ++l) block_max[l & 1] = fmax(v[l], block_max[l & 1]);
    const T m = fmax(block_max[1], block_max[0]);
    max       = m > max ? m : max;
    if (m > s + T(kHeldShiftSlack)) {  // the first finite block, or a maximum far above s (rare)
      if (s > -Infinity<T>::value) {
        const T f = row_exp(s - m);
        sum *= static_cast<double>(f);
        for (std::int64_t jp = blocks.begin(lane); jp < j0; jp += blocks.step())
          for (int l = 0; l < B; ++l) cache(jp + l * dj) *= f;  // the worker's earlier blocks are full
      }
      s = m;
    }
    const T base = s == -Infinity<T>::value ? T(0) : s;
    T e[B];
    T part = 0;
    for (int l = 0; l < B; ++l) {
      e[l] = row_exp(v[l] - base);
      part += e[l];
    }
    sum += static_cast<double>(part);
    if (len == B) {  // unguarded: one address step per store
      for (int l = 0; l < B; ++l) cache(j0 + l * dj) = e[l];
    } else {
      for (int l = 0; l < B; ++l)
        if (l < len) cache(j0 + l * dj) = e[l];  // compile-time indices keep e in registers
    }
  };
  Kokkos::parallel_for(workers.range(blocks.lanes()), [&](const std::int64_t lane) {
    for_lane_blocks<T, B, Pipelined, Workers::fixed_count>(
        blocks, lane, x_row, op,
        [&](const std::int64_t j0, const int len, const T(&v)[B]) { add_block(lane, j0, len, v); }, ahead);
  });
  shift = s;
  return join_workers(workers, RowStats<T>{max, s == max ? sum : sum * static_cast<double>(row_exp(s - max))});
}

/// What a worker of a held row multiplies its e_j by: exp(shift - max) * inv (0 for a worker of -inf and NaN).
template <class T>
KOKKOS_INLINE_FUNCTION T held_row_factor(const T shift, const T max, const T inv) {
  return (shift == -Infinity<T>::value ? T(0) : row_exp(shift - max)) * inv;
}

/// y_row(j) = e_j * exp(shift - max) * inv, e_j from `cache` (filled by held_row_stats with the same workers).
template <class T, int B, class Workers, class YRow, class Cache>
KOKKOS_INLINE_FUNCTION void held_row_write(const Workers& workers, const YRow& y_row, const Cache& cache, const T shift,
                                           const T max, const T inv) {
  const std::int64_t n = y_row.extent(0);
  const RowBlocks<B, true, Workers::fixed_count> blocks(n, workers.count());
  const std::int64_t dj = blocks.spacing();
  const T factor        = held_row_factor(shift, max, inv);
  Kokkos::parallel_for(workers.range(blocks.lanes()), [&](const std::int64_t lane) {
    for (std::int64_t j0 = blocks.begin(lane); j0 < n; j0 += blocks.step())
      write_held_block<T, B>(y_row, cache, j0, dj, blocks.length(j0), factor);
  });
}

/// Both passes over one row: y_row = softmax(op(j, x_row(j))).
/// Held rows on GPUs: held_row_stats and held_row_write (Pipelined: loading a block ahead).
template <class T, int B, bool Interleaved, bool Pipelined = false, class Workers, class XRow, class YRow, class Cache,
          class Op>
KOKKOS_INLINE_FUNCTION void row_softmax_pass(const Workers& workers, const XRow& x_row, const YRow& y_row,
                                             const Cache& cache, const Op& op) {
  if constexpr (Interleaved && Kokkos::is_view<Cache>::value) {
    T shift                 = 0;
    const RowStats<T> stats = held_row_stats<T, B, Pipelined>(workers, x_row, cache, op, shift);
    held_row_write<T, B>(workers, y_row, cache, shift, stats.max, stats.inverse_sum());
  } else {
    const RowStats<T> stats = row_stats<T, B, Interleaved>(workers, x_row, cache, op);
    row_write<T, B, Interleaved>(workers, x_row, y_row, cache, op, stats.max, stats.inverse_sum());
  }
}

}  // namespace Impl
}  // namespace softfuse

#endif
