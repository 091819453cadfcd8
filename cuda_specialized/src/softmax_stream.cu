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

// KB: partials a control-warp lane loads per round trip of a join (32 * KB per round trip)
template <class T, int V, int NT, int NB, int R, int KB>
__global__ void __launch_bounds__(NT + 32, 1) softmax_stream_kernel(const StreamArgs<T> a) {
  static_assert(R >= 2 && R <= NB - 2, "reduce lead: at least one load in flight, one step of slack");
  constexpr int NW = NT / 32;
  using P          = Pack<T, V>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  P* const buf = reinterpret_cast<P*>(smem_raw);
  __shared__ MS<T> red[2][NW];
  __shared__ MS<T> tot_s[2];
  __shared__ T mth[NB][NT];  // each data thread's maximum over its part of the chunk in each buffer
  const int t              = threadIdx.x;
  const int lane           = t & 31;
  const bool control       = t >= NT;
  const int kpt            = a.kpt;
  const std::int64_t cv    = static_cast<std::int64_t>(kpt) * NT;  // vectors per chunk
  const std::int64_t nvec  = a.cols / V;
  const std::int64_t total = a.rows * a.nchunks;
  const std::int64_t G     = gridDim.x;
  const T ninf             = neg_inf(T());

  auto slot = [&](int b, int i) { return buf + (static_cast<std::int64_t>(b) * kpt + i) * NT + t; };
  // this data thread's vectors of chunk c: i * NT + t for i < count
  auto count = [&](std::int64_t c) {
    const std::int64_t left = nvec - c * cv - t;
    return left <= 0 ? 0 : static_cast<int>(min(static_cast<std::int64_t>(kpt), (left + NT - 1) / NT));
  };
  auto issue = [&](std::int64_t tk, int b) {
    if (tk < total) {
      const std::int64_t r = tk / a.nchunks, c = tk - r * a.nchunks;
      const T* xr = a.x + r * a.ldx + (c * cv + t) * V;
      const int n = count(c);
      for (int i = 0; i < n; ++i) cp_async<sizeof(P)>(slot(b, i), xr + static_cast<std::int64_t>(i) * NT * V);
    }
    cp_async_commit();
  };
  // Data warps: chunk tk (landed in buffer b) as exponentials against the thread's maximum, in
  // place; the warp's partial into red[p] for the control warp.
  auto reduce = [&](std::int64_t tk, int b, int p) {
    T m      = ninf;
    double s = 0.0;
    if (tk < total) {
      const int n = count(tk % a.nchunks);
      for (int i = 0; i < n; ++i) m = max_pack(load_slot<T, V>(slot(b, i)), m);
      for (int i = 0; i < n; ++i) {
        P v = load_slot<T, V>(slot(b, i));
        exp_pack(v, m);
        store_slot<T, V>(slot(b, i), v);
        s += sum_pack(v);
      }
    }
    mth[b][t]     = m;
    const MS<T> w = warp_join<32>(MS<T>{m, s});
    if (lane == 0) red[p][t >> 5] = w;
  };
  // Control warp: the block's partial of chunk tk published (no fence, no wait).
  auto publish = [&](std::int64_t tk, int p) {
    if (tk >= total) return;
    const MS<T> st = warp_join<NW>(red[p][lane % NW]);
    if (lane == 0) publish_tagged(a.parts + tk * kStreamSlotWords, st, a.epoch);
  };
  // Control warp: chunk tk's row total into tot_s[p], from the row's partials as they arrive
  // (joined in the same order for every chunk of the row, so all get the bitwise-same (M, S)).
  // All of a lane's loads are issued before any is checked: one round trip when all are there.
  auto fetch_total = [&](std::int64_t tk, int p) {
    const std::int64_t r         = tk / a.nchunks;
    const unsigned long long* pr = a.parts + r * a.nchunks * kStreamSlotWords;
    MS<T> w                      = ms_identity<T>();
    for (std::int64_t q0 = lane; q0 < a.nchunks; q0 += 32 * KB) {
      unsigned long long v[KB][kStreamSlotWords];
#pragma unroll
      for (int u = 0; u < KB; ++u) {
        const std::int64_t q = q0 + 32 * u;
#pragma unroll
        for (int i = 0; i < kStreamSlotWords; ++i)
          v[u][i] = q < a.nchunks ? ld_relaxed_gpu_u64(pr + q * kStreamSlotWords + i) : 0ull;
      }
#pragma unroll
      for (int u = 0; u < KB; ++u) {
        const std::int64_t q = q0 + 32 * u;
        if (q < a.nchunks) w = ms_join(w, complete_tagged<T>(pr + q * kStreamSlotWords, v[u], a.epoch));
      }
    }
    w = warp_join<32>(w);
    if (lane == 0) tot_s[p] = w;
  };
  auto write = [&](std::int64_t tk, int b, int p) {
    const std::int64_t c = tk % a.nchunks, r = tk / a.nchunks;
    const MS<T> tot = tot_s[p];
    const T f       = is_inf(tot.m) ? quiet_nan(T()) : exp_t(mth[b][t] - tot.m) * static_cast<T>(1.0 / tot.s);
    T* yr           = a.y + r * a.ldy + (c * cv + t) * V;
    const int n     = count(c);
    for (int i = 0; i < n; ++i)
      store_pack<T, V>(yr + static_cast<std::int64_t>(i) * NT * V, scale_pack(load_slot<T, V>(slot(b, i)), f));
  };

  // Step k (one block barrier): data warps load chunk k + NB - 1 into the buffer chunk k - 1
  // left and reduce chunk k + R, while the control warp fetches chunk k's row total (its
  // partials published at least one step earlier: see the condition at the top);
  // after the barrier the control warp publishes chunk k + R and the data warps write chunk k.
  const std::int64_t t0 = blockIdx.x;
  if (!control) {
#pragma unroll
    for (int j = 0; j < NB - 1; ++j) issue(t0 + j * G, j);
  }
#pragma unroll
  for (int j = 0; j < R; ++j) {
    if (!control) {
      cp_async_wait_upto(NB - 2 - j);
      reduce(t0 + j * G, j, j & 1);
    }
    __syncthreads();
    if (control) publish(t0 + j * G, j & 1);
  }
  for (std::int64_t k = 0;; ++k) {
    const std::int64_t tk = t0 + k * G;
    if (tk >= total) break;
    const int p = static_cast<int>((k + R) & 1);
    if (!control) {
      issue(tk + (NB - 1) * G, static_cast<int>((k + NB - 1) % NB));
      cp_async_wait<NB - 1 - R>();
      reduce(tk + R * G, static_cast<int>((k + R) % NB), p);
    } else {
      fetch_total(tk, static_cast<int>(k & 1));
    }
    __syncthreads();
    if (control) {
      publish(tk + R * G, p);
    } else {
      write(tk, static_cast<int>(k % NB), static_cast<int>(k & 1));
    }
  }
  cp_async_wait<0>();
}

// The (buffers, lead) pairs compiled: the two the plan picks (4/2, 5/3) and 6/4, the
// benchmark's alternative for long rows; each with the narrow and the wide join.
template <class T, int V, int NB, int R>
const void* stream_kernel_join(std::int64_t nchunks) {
  if (nchunks > 32 * kStreamJoinNarrow)
    return reinterpret_cast<const void*>(&softmax_stream_kernel<T, V, kStreamThreads, NB, R, kStreamJoinWide>);
  return reinterpret_cast<const void*>(&softmax_stream_kernel<T, V, kStreamThreads, NB, R, kStreamJoinNarrow>);
}
template <class T, int V>
const void* stream_kernel_v(int threads, int buffers, int lead, std::int64_t nchunks) {
  if (threads != kStreamThreads) return nullptr;
  switch (buffers * 16 + lead) {
    case 4 * 16 + 2: return stream_kernel_join<T, V, 4, 2>(nchunks);
    case 5 * 16 + 3: return stream_kernel_join<T, V, 5, 3>(nchunks);
    case 6 * 16 + 4: return stream_kernel_join<T, V, 6, 4>(nchunks);
    default: return nullptr;
  }
}

}  // namespace

template <class T>
const void* stream_kernel(int vec, int threads, int buffers, int lead, std::int64_t nchunks) {
  constexpr int VV = 16 / static_cast<int>(sizeof(T));
  if (vec == VV) return stream_kernel_v<T, VV>(threads, buffers, lead, nchunks);
  if (vec == 1) return stream_kernel_v<T, 1>(threads, buffers, lead, nchunks);
  return nullptr;
}

template const void* stream_kernel<float>(int, int, int, int, std::int64_t);
template const void* stream_kernel<double>(int, int, int, int, std::int64_t);

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse
