// Long rows as a stream of chunks: a persistent cooperative grid takes fixed-size chunks of the
// matrix in order (block b: chunks b, b + G, b + 2G, ...; G blocks), each chunk read once into
// one of NB shared-memory buffers. Per chunk k of a block:
//   load     chunk k + NB - 1 starts copying into the buffer chunk k - 1 left;
//   reduce   chunk k + R has landed: exp(x - m_t) in place (m_t the thread's maximum over its
//            part), the block's partial (m, s) published as tagged words;
//   write    the partials of chunk k's row joined once all are there (the same order in
//            every block): y = e * (exp(m_t - M) / S) from the buffer.
// No grid-wide step: blocks meet only through the partials of the rows they share, and each
// block keeps its next loads in flight while it waits, so the memory keeps streaming through the
// joins. A block waits at step k only for partials published at steps <= k - 1 when a row spans
// at most R - 1 steps of the grid plus one chunk (nchunks <= (R - 1) G + 1, checked by
// stream_shape in softmax_shape.hpp); all blocks are resident (cooperative launch), so the waits
// cannot deadlock.
#include "softmax_common.cuh"
#include "softmax_plan.hpp"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

namespace {

// A partial (m, s) as four 8-byte words, each a 32-bit half of m or s (both as doubles) tagged in
// its upper half with the call's epoch (a.epoch, never 0): a word is written and read whole
// (relaxed, single-copy atomic), so a reader that sees the epoch has that half, with no fence on
// either side. Words of earlier calls carry older epochs (or 0, as zeroed) and never match.
__device__ __forceinline__ void st_relaxed_gpu_u64(unsigned long long* p, unsigned long long v) {
  asm volatile("st.relaxed.gpu.global.b64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long ld_relaxed_gpu_u64(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned long long tagged(int half, unsigned epoch) {
  return (static_cast<unsigned long long>(epoch) << 32) | static_cast<unsigned>(half);
}
template <class T>
__device__ __forceinline__ void publish_tagged(unsigned long long* slot, const MS<T>& v, unsigned epoch) {
  const double m = static_cast<double>(v.m);
  st_relaxed_gpu_u64(slot + 0, tagged(__double2hiint(m), epoch));
  st_relaxed_gpu_u64(slot + 1, tagged(__double2loint(m), epoch));
  st_relaxed_gpu_u64(slot + 2, tagged(__double2hiint(v.s), epoch));
  st_relaxed_gpu_u64(slot + 3, tagged(__double2loint(v.s), epoch));
}
// The four words already loaded into w; reloads those not yet written.
template <class T>
__device__ __forceinline__ MS<T> complete_tagged(const unsigned long long* slot,
                                                 unsigned long long (&w)[kStreamSlotWords], unsigned epoch) {
#pragma unroll
  for (int i = 0; i < kStreamSlotWords; ++i)
    while ((w[i] >> 32) != epoch) w[i] = ld_relaxed_gpu_u64(slot + i);
  const auto half = [&](int i) { return static_cast<int>(static_cast<unsigned>(w[i])); };
  return MS<T>{static_cast<T>(__hiloint2double(half(0), half(1))), __hiloint2double(half(2), half(3))};
}

// A chunk of the stream as (row r, chunk c of the row), stepped by the grid without a division per step (a
// 64-bit division per chunk and phase, where a block's chunks are numbered in one sequence). A row's chunks are
// few (stream_shape bounds them by the resident blocks), so c is an int.
struct ChunkPos {
  std::int64_t r;
  int c;
  __device__ __forceinline__ void advance(std::int64_t dr, int dc, int nchunks) {
    r += dr;
    c += dc;
    if (c >= nchunks) {
      c -= nchunks;
      ++r;
    }
  }
};

// The most vectors per thread and chunk of the (NB, R) kernel: those of the chunk its plans take (48 KB for 4
// buffers, 40 KB for 5, 32 KB for 6), held in registers between the loads and the stores of each pass.
template <class T, int V, int NT, int NB>
constexpr int stream_kmax() {
  constexpr std::int64_t bytes = NB == 4 ? kStreamShortChunkBytes : NB == 5 ? kStreamLongChunkBytes : 32 * 1024;
  return static_cast<int>(bytes / (NT * V * static_cast<std::int64_t>(sizeof(T))));
}

// KB: partials a control-warp lane loads per round trip of a join (32 * KB per round trip); KMAX: the most
// vectors per thread and chunk (a.kpt <= KMAX), unrolled so that each access is an offset from one address.
template <class T, int V, int NT, int NB, int R, int KB, int KMAX>
__global__ void __launch_bounds__(NT + 32, 1) softmax_stream_kernel(const StreamArgs<T> a) {
  static_assert(R >= 2 && R <= NB - 2, "reduce lead: at least one load in flight, one step of slack");
  constexpr int NW = NT / 32;
  using P          = Pack<T, V>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  P* const buf = reinterpret_cast<P*>(smem_raw);
  __shared__ MS<T> red[2][NW];
  __shared__ MS<T> tot_s[2];
  __shared__ T mth[NB][NT];  // each data thread's maximum over its part of the chunk in each buffer
  const int t             = threadIdx.x;
  const int lane          = t & 31;
  const bool control      = t >= NT;
  const int kpt           = a.kpt;
  const std::int64_t cv   = static_cast<std::int64_t>(kpt) * NT;  // vectors per chunk
  const std::int64_t nvec = a.cols / V;
  const int nchunks       = static_cast<int>(a.nchunks);
  // one step of the grid (G blocks) in rows and chunks
  const std::int64_t dr = gridDim.x / nchunks;
  const int dc          = static_cast<int>(gridDim.x - dr * nchunks);
  const T ninf          = neg_inf(T());

  // this data thread's first vector of buffer b; its i-th is i * NT further
  auto slot0 = [&](int b) { return buf + static_cast<std::int64_t>(b) * kpt * NT + t; };
  // this data thread's vectors of chunk c: i * NT + t for i < count
  auto count = [&](int c) {
    const std::int64_t left = nvec - static_cast<std::int64_t>(c) * cv - t;
    return left <= 0 ? 0 : static_cast<int>(min(static_cast<std::int64_t>(kpt), (left + NT - 1) / NT));
  };
  auto issue = [&](const ChunkPos& q, int b) {
    if (q.r < a.rows) {
      const T* xr = a.x + q.r * a.ldx + (q.c * cv + t) * V;
      P* const s  = slot0(b);
      const int n = count(q.c);
#pragma unroll
      for (int i = 0; i < KMAX; ++i)
        if (i < n) cp_async<sizeof(P)>(s + i * NT, xr + i * NT * V);
    }
    cp_async_commit();
  };
  // Data warps: chunk q (landed in buffer b) as exponentials against the thread's maximum, in
  // place; the warp's partial into red[p] for the control warp.
  auto reduce = [&](const ChunkPos& q, int b, int p) {
    T m      = ninf;
    double s = 0.0;
    if (q.r < a.rows) {
      const int n = count(q.c);
      P* const sl = slot0(b);
      P v[KMAX];
#pragma unroll
      for (int i = 0; i < KMAX; ++i)
        if (i < n) {
          v[i] = load_slot<T, V>(sl + i * NT);
          m    = max_pack(v[i], m);
        }
      // float: against 0 where m is -inf, so that a -inf element's argument is -inf with no test per element
      const T shift = m == ninf ? T(0) : m;
#pragma unroll
      for (int i = 0; i < KMAX; ++i)
        if (i < n) {
          if constexpr (sizeof(T) == 4) {
#pragma unroll
            for (int e = 0; e < V; ++e) v[i].v[e] = exp_t(v[i].v[e] - shift);
          } else {
            exp_pack(v[i], m);
          }
          store_slot<T, V>(sl + i * NT, v[i]);
          s += sum_pack(v[i]);
        }
    }
    mth[b][t]     = m;
    const MS<T> w = warp_join<32>(MS<T>{m, s});
    if (lane == 0) red[p][t >> 5] = w;
  };
  // Control warp: the block's partial of chunk q published (no fence, no wait).
  auto publish = [&](const ChunkPos& q, int p) {
    if (q.r >= a.rows) return;
    const MS<T> st = warp_join<NW>(red[p][lane % NW]);
    if (lane == 0) publish_tagged(a.parts + (q.r * nchunks + q.c) * kStreamSlotWords, st, a.epoch);
  };
  // Control warp: the total of chunk q's row into tot_s[p], from the row's partials as they arrive
  // (joined in the same order for every chunk of the row, so all get the bitwise-same (M, S)).
  // All of a lane's loads are issued before any is checked: one round trip when all are there.
  auto fetch_total = [&](const ChunkPos& q, int p) {
    const unsigned long long* pr = a.parts + q.r * nchunks * kStreamSlotWords;
    MS<T> w                      = ms_identity<T>();
    for (int q0 = lane; q0 < nchunks; q0 += 32 * KB) {
      unsigned long long v[KB][kStreamSlotWords];
#pragma unroll
      for (int u = 0; u < KB; ++u) {
        const int k = q0 + 32 * u;
#pragma unroll
        for (int i = 0; i < kStreamSlotWords; ++i)
          v[u][i] = k < nchunks ? ld_relaxed_gpu_u64(pr + k * kStreamSlotWords + i) : 0ull;
      }
#pragma unroll
      for (int u = 0; u < KB; ++u) {
        const int k = q0 + 32 * u;
        if (k < nchunks) w = ms_join(w, complete_tagged<T>(pr + k * kStreamSlotWords, v[u], a.epoch));
      }
    }
    w = warp_join<32>(w);
    if (lane == 0) tot_s[p] = w;
  };
  // Data warps: chunk q from buffer b, y = e * (exp(m_t - M) / S); all of its vectors read before any is stored.
  auto write = [&](const ChunkPos& q, int b, int p) {
    const MS<T> tot   = tot_s[p];
    const T f         = is_inf(tot.m) ? quiet_nan(T()) : exp_t(mth[b][t] - tot.m) * static_cast<T>(1.0 / tot.s);
    T* const yr       = a.y + q.r * a.ldy + (q.c * cv + t) * V;
    const int n       = count(q.c);
    const P* const sl = slot0(b);
    P v[KMAX];
#pragma unroll
    for (int i = 0; i < KMAX; ++i)
      if (i < n) v[i] = load_slot<T, V>(sl + i * NT);
#pragma unroll
    for (int i = 0; i < KMAX; ++i)
      if (i < n) store_pack<T, V>(yr + i * NT * V, scale_pack(v[i], f));
  };

  // Step k (one block barrier): data warps load chunk k + NB - 1 into the buffer chunk k - 1
  // left and reduce chunk k + R, while the control warp fetches chunk k's row total (its
  // partials published at least one step earlier: see the condition at the top);
  // after the barrier the control warp publishes chunk k + R and the data warps write chunk k.
  // A block's chunks: out, the next to write (step k: chunk k), and those R and NB - 1 steps ahead of it, stepped
  // from out at every step. The data warps and the control warp run loops of their own, with the same barriers,
  // so that neither holds the other's registers (in one loop the wide join's partials spilled).
  const auto ahead = [&](ChunkPos q, int steps) {
    for (int j = 0; j < steps; ++j) q.advance(dr, dc, nchunks);
    return q;
  };
  ChunkPos out;
  out.r = blockIdx.x / nchunks;
  out.c = static_cast<int>(blockIdx.x - out.r * nchunks);
  if (!control) {
#pragma unroll
    for (int j = 0; j < NB - 1; ++j) issue(ahead(out, j), j);
#pragma unroll
    for (int j = 0; j < R; ++j) {
      cp_async_wait_upto(NB - 2 - j);
      reduce(ahead(out, j), j, j & 1);
      __syncthreads();
    }
    for (std::int64_t k = 0; out.r < a.rows; ++k) {
      const ChunkPos reduced = ahead(out, R);
      issue(ahead(reduced, NB - 1 - R), static_cast<int>((k + NB - 1) % NB));
      cp_async_wait<NB - 1 - R>();
      reduce(reduced, static_cast<int>((k + R) % NB), static_cast<int>((k + R) & 1));
      __syncthreads();
      write(out, static_cast<int>(k % NB), static_cast<int>(k & 1));
      out.advance(dr, dc, nchunks);
    }
    cp_async_wait<0>();
  } else {
#pragma unroll
    for (int j = 0; j < R; ++j) {
      __syncthreads();
      publish(ahead(out, j), j & 1);
    }
    for (std::int64_t k = 0; out.r < a.rows; ++k) {
      fetch_total(out, static_cast<int>(k & 1));
      __syncthreads();
      publish(ahead(out, R), static_cast<int>((k + R) & 1));
      out.advance(dr, dc, nchunks);
    }
  }
}

// The (buffers, lead) pairs compiled: the two the plan picks (4/2, 5/3) and 6/4, the
// benchmark's alternative for long rows; each with the narrow and the wide join. nullptr where the chunk holds more
// vectors per thread than the kernel unrolls.
template <class T, int V, int NB, int R>
const void* stream_kernel_join(int kpt, std::int64_t nchunks) {
  constexpr int KMAX = stream_kmax<T, V, kStreamThreads, NB>();
  if (kpt > KMAX) return nullptr;
  if (nchunks > 32 * kStreamJoinNarrow)
    return reinterpret_cast<const void*>(&softmax_stream_kernel<T, V, kStreamThreads, NB, R, kStreamJoinWide, KMAX>);
  return reinterpret_cast<const void*>(&softmax_stream_kernel<T, V, kStreamThreads, NB, R, kStreamJoinNarrow, KMAX>);
}
template <class T, int V>
const void* stream_kernel_v(int threads, int buffers, int lead, int kpt, std::int64_t nchunks) {
  if (threads != kStreamThreads) return nullptr;
  switch (buffers * 16 + lead) {
    case 4 * 16 + 2: return stream_kernel_join<T, V, 4, 2>(kpt, nchunks);
    case 5 * 16 + 3: return stream_kernel_join<T, V, 5, 3>(kpt, nchunks);
    case 6 * 16 + 4: return stream_kernel_join<T, V, 6, 4>(kpt, nchunks);
    default: return nullptr;
  }
}

}  // namespace

template <class T>
const void* stream_kernel(int vec, int threads, int buffers, int lead, int kpt, std::int64_t nchunks) {
  constexpr int VV = 16 / static_cast<int>(sizeof(T));
  if (vec == VV) return stream_kernel_v<T, VV>(threads, buffers, lead, kpt, nchunks);
  if (vec == 1) return stream_kernel_v<T, 1>(threads, buffers, lead, kpt, nchunks);
  return nullptr;
}

template const void* stream_kernel<float>(int, int, int, int, int, std::int64_t);
template const void* stream_kernel<double>(int, int, int, int, int, std::int64_t);

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse
