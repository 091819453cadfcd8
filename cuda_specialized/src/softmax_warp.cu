// Short rows (up to 4 KB; 16 KB in groups of 128 lanes): a group of G lanes per row (G = 1..32, or G = 64, 128: the
// warps of half or all of a block), the row in registers, grid-stride over rows. Max and sum are reduced with shuffles,
// and for G > 32 across the group's warps through shared memory. Each group takes RB rows per step and issues all their
// loads before reducing any: RB times the bytes a lane has in flight, for rows too short to keep the memory busy one at
// a time. The steps may start a.skew rows before row 0 (those rows masked), so that a warp's loads of short rows cover
// whole 256-byte blocks.
#include "softmax_common.cuh"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

template <class T, int V, int G, int NCH, int RB>
__global__ void __launch_bounds__(kWarpBlockThreads) softmax_warp_kernel(const WarpArgs<T> a) {
  using P             = Pack<T, V>;
  constexpr bool WIDE = G > 32;  // a group of several warps: the loop runs per block, so that all reach the barriers
  constexpr int GW    = WIDE ? G / 32 : 1;                      // warps per group
  constexpr int RPW   = WIDE ? kWarpBlockThreads / G : 32 / G;  // rows per warp (per block where WIDE) and batch
  constexpr int RSTEP = RPW * RB;                               // rows per warp (block) and step
  static_assert(!WIDE || (G % 32 == 0 && kWarpBlockThreads % G == 0), "a group is whole warps of one block");
  __shared__ T wmax[WIDE ? kWarpBlockThreads / 32 : 1][RB];
  __shared__ double wsum[WIDE ? kWarpBlockThreads / 32 : 1][RB];
  const int lane          = threadIdx.x & 31;
  const int gl            = WIDE ? static_cast<int>(threadIdx.x) % G : lane % G;
  const int grp           = WIDE ? static_cast<int>(threadIdx.x) / G : lane / G;
  const int warp          = threadIdx.x >> 5;
  const std::int64_t gw   = WIDE ? blockIdx.x : (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const std::int64_t nw   = WIDE ? gridDim.x : (static_cast<std::int64_t>(gridDim.x) * blockDim.x) >> 5;
  const std::int64_t nvec = a.cols / V;
  const T ninf            = neg_inf(T());
  // the group's warps' values of batch row b joined by op (max or sum), for every lane of the group; a warp rewrites
  // its slot of wmax (wsum) only after the next barrier, which every lane reaches after reading the slots
  const auto join = [&](auto v, auto& slots, int b, auto op) {
    if constexpr (WIDE) {
      if (lane == 0) slots[warp][b] = v;
      __syncthreads();
      v = slots[grp * GW][b];
#pragma unroll
      for (int w = 1; w < GW; ++w) v = op(v, slots[grp * GW + w][b]);
    }
    return v;
  };

  for (std::int64_t r0 = gw * RSTEP - a.skew; r0 < a.rows; r0 += nw * RSTEP) {
    P v[RB][NCH];
#pragma unroll
    for (int b = 0; b < RB; ++b) {
      const std::int64_t r = r0 + b * RPW + grp;
      const bool rv        = r >= 0 && r < a.rows;
      const T* xr          = a.x + (rv ? r : 0) * a.ldx;
#pragma unroll
      for (int k = 0; k < NCH; ++k) {
        const std::int64_t c = static_cast<std::int64_t>(k) * G + gl;
        if (rv && c < nvec) {
          v[b][k] = load_pack<T, V>(xr + c * V);
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) v[b][k].v[e] = ninf;
        }
      }
    }
#pragma unroll
    for (int b = 0; b < RB; ++b) {
      T m = ninf;
#pragma unroll
      for (int k = 0; k < NCH; ++k) m = max_pack(v[b][k], m);
#pragma unroll
      for (int o = (WIDE ? 32 : G) / 2; o > 0; o >>= 1) m = max_t(m, __shfl_xor_sync(0xffffffffu, m, o));
      m = join(m, wmax, b, [](T x, T y) { return max_t(x, y); });
      // exponentials kept in place: one exp per element
      double s = 0.0;
#pragma unroll
      for (int k = 0; k < NCH; ++k) {
        exp_pack(v[b][k], m);
        s += sum_pack(v[b][k]);
      }
#pragma unroll
      for (int o = (WIDE ? 32 : G) / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      s                    = join(s, wsum, b, [](double x, double y) { return x + y; });
      const T f            = is_inf(m) ? quiet_nan(T()) : static_cast<T>(1.0 / s);
      const std::int64_t r = r0 + b * RPW + grp;
      if (r >= 0 && r < a.rows) {
        T* yr = a.y + r * a.ldy;
#pragma unroll
        for (int k = 0; k < NCH; ++k) {
          const std::int64_t c = static_cast<std::int64_t>(k) * G + gl;
          if (c < nvec) store_pack<T, V>(yr + c * V, scale_pack(v[b][k], f));
        }
      }
    }
  }
}

namespace {
template <class T, int V, int G, int NCH, int RB>
const void* wk() {
  return reinterpret_cast<const void*>(&softmax_warp_kernel<T, V, G, NCH, RB>);
}

// Row batches: 1 for every kernel; 2 for 16-byte vectors where a lane holds one vector of a row.
template <class T, int V, int G, int NCH>
const void* wk(int batch) {
  if (batch == 1) return wk<T, V, G, NCH, 1>();
  if constexpr (V > 1 && NCH == 1)
    if (batch == kWarpRowBatch) return wk<T, V, G, NCH, kWarpRowBatch>();
  return nullptr;
}

// Instantiations: G in {1,2,4,8,16} with one vector per lane, G = 32 with NCH vectors per lane (1..8 for 16-byte
// vectors; powers of two up to 4 KB rows for scalars), and for 16-byte vectors without row batches G = 64 with 2 or 4
// and G = 128 with 1, 2, 4 or 8.
template <class T, int V>
const void* warp_kernel_v(int group, int chunks, int batch) {
  if (group < 32) {
    if (chunks != 1) return nullptr;
    switch (group) {
      case 1: return wk<T, V, 1, 1>(batch);
      case 2: return wk<T, V, 2, 1>(batch);
      case 4: return wk<T, V, 4, 1>(batch);
      case 8: return wk<T, V, 8, 1>(batch);
      case 16: return wk<T, V, 16, 1>(batch);
      default: return nullptr;
    }
  }
  if constexpr (V > 1) {
    if (group == 64 || group == 128) {
      if (batch != 1) return nullptr;
      switch (group * 32 + chunks) {
        case 64 * 32 + 2: return wk<T, V, 64, 2, 1>();
        case 64 * 32 + 4: return wk<T, V, 64, 4, 1>();
        case 128 * 32 + 1: return wk<T, V, 128, 1, 1>();
        case 128 * 32 + 2: return wk<T, V, 128, 2, 1>();
        case 128 * 32 + 4: return wk<T, V, 128, 4, 1>();
        case 128 * 32 + 8: return wk<T, V, 128, 8, 1>();
        default: return nullptr;
      }
    }
  }
  if (group != 32) return nullptr;
  if constexpr (V > 1) {
    switch (chunks) {
      case 1: return wk<T, V, 32, 1>(batch);
      case 2: return wk<T, V, 32, 2>(batch);
      case 3: return wk<T, V, 32, 3>(batch);
      case 4: return wk<T, V, 32, 4>(batch);
      case 5: return wk<T, V, 32, 5>(batch);
      case 6: return wk<T, V, 32, 6>(batch);
      case 7: return wk<T, V, 32, 7>(batch);
      case 8: return wk<T, V, 32, 8>(batch);
      default: return nullptr;
    }
  } else {
    constexpr int maxc = 4096 / 32 / static_cast<int>(sizeof(T));
    switch (chunks) {
      case 1: return wk<T, 1, 32, 1>(batch);
      case 2: return wk<T, 1, 32, 2>(batch);
      case 4: return wk<T, 1, 32, 4>(batch);
      case 8: return wk<T, 1, 32, 8>(batch);
      case 16: return wk<T, 1, 32, 16>(batch);
      case 32: return maxc >= 32 ? wk<T, 1, 32, (maxc >= 32 ? 32 : 16)>(batch) : nullptr;
      default: return nullptr;
    }
  }
}
}  // namespace

template <class T>
const void* warp_kernel(int vec, int group, int chunks, int batch) {
  constexpr int VV = 16 / static_cast<int>(sizeof(T));
  if (vec == VV) return warp_kernel_v<T, VV>(group, chunks, batch);
  if (vec == 1) return warp_kernel_v<T, 1>(group, chunks, batch);
  return nullptr;
}

template const void* warp_kernel<float>(int, int, int, int);
template const void* warp_kernel<double>(int, int, int, int);

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse
