// Private: the per-row math shared by every softmax kernel (device code only).
//
// State of a partial row reduction: (m, s) with m the running maximum (in the input type,
// never NaN) and s the sum of exp(x - m) accumulated in double.
//   element update: x > m: s = s*exp(m - x) + 1, m = x; else s += (x == -inf ? 0 : exp(x - m))
//   join:           m = max(m1, m2); s = s1*(m1 == m ? 1 : exp(m1 - m)) + s2*(m2 == m ? 1 : exp(m2 - m))
//   final:          m = +-inf -> NaN row; else y = exp(x - m) * (1/s)
// exp is evaluated in the input type (expf for float, exp for double; no fast math).
#ifndef SOFTFUSE_CUDA_SPECIALIZED_SOFTMAX_COMMON_CUH
#define SOFTFUSE_CUDA_SPECIALIZED_SOFTMAX_COMMON_CUH

#include <cstdint>
#include <cuda_runtime.h>
#include <math_constants.h>

#include "softmax_kernels.hpp"

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 800)
#error "softfuse::cuda_specialized kernels need sm_80 or newer (cp.async)"
#endif

namespace softfuse {
namespace cuda_specialized {
namespace impl {

// V consecutive elements loaded or stored as one access (16 bytes when V*sizeof(T) == 16).
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

__device__ __forceinline__ float neg_inf(float) { return -CUDART_INF_F; }
__device__ __forceinline__ double neg_inf(double) { return -CUDART_INF; }
__device__ __forceinline__ float quiet_nan(float) { return CUDART_NAN_F; }
__device__ __forceinline__ double quiet_nan(double) { return CUDART_NAN; }
__device__ __forceinline__ float exp_t(float x) { return expf(x); }
__device__ __forceinline__ double exp_t(double x) { return exp(x); }
// fmax ignores a NaN operand: a NaN element never becomes the maximum (as with `x > m`).
__device__ __forceinline__ float max_t(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double max_t(double a, double b) { return fmax(a, b); }
__device__ __forceinline__ bool is_inf(float a) { return isinf(a); }
__device__ __forceinline__ bool is_inf(double a) { return isinf(a); }

template <class T>
__device__ __forceinline__ MS<T> ms_identity() {
  return MS<T>{neg_inf(T()), 0.0};
}

// join is exactly commutative (explicit roundings, no FMA contraction).
template <class T>
__device__ __forceinline__ MS<T> ms_join(const MS<T>& a, const MS<T>& b) {
  const T m       = max_t(a.m, b.m);
  const double fa = (a.m == m) ? 1.0 : static_cast<double>(exp_t(a.m - m));
  const double fb = (b.m == m) ? 1.0 : static_cast<double>(exp_t(b.m - m));
  return MS<T>{m, __dadd_rn(__dmul_rn(a.s, fa), __dmul_rn(b.s, fb))};
}

// Join over aligned groups of W lanes (butterfly): the maximum first, then each lane rescales
// its sum once, then the sums. The same join as ms_join over the group (s_i scaled by
// exp(m_i - M) unless m_i == M), cheaper than W-1 pairwise joins; every lane of a group ends
// with the bitwise-same result (the xor butterfly adds the same pairs in every lane).
template <int W, class T>
__device__ __forceinline__ MS<T> warp_join(MS<T> v) {
  T m = v.m;
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) m = max_t(m, __shfl_xor_sync(0xffffffffu, m, o));
  double s = (v.m == m) ? v.s : v.s * static_cast<double>(exp_t(v.m - m));
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return MS<T>{m, s};
}

// Join over a block of NT threads through `red` (NT/32 slots); every thread gets the
// bitwise-same result. One __syncthreads; `red` may be rewritten only after a later barrier.
template <int NT, class T>
__device__ __forceinline__ MS<T> block_join(MS<T> v, MS<T>* red) {
  constexpr int NW = NT / 32;
  static_assert(NT % 32 == 0 && NW <= 32 && (NW & (NW - 1)) == 0, "block size");
  const int lane = threadIdx.x & 31;
  v              = warp_join<32>(v);
  if (lane == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  if constexpr (NW == 1) {
    return red[0];
  } else {
    return warp_join<NW>(red[lane % NW]);  // each aligned group of NW lanes holds all partials
  }
}

// Exponentials of a pack against m (-inf elements give 0, NaN stays NaN), in place. In float a
// -inf element's argument is -inf (exp gives 0, also where m is -inf) rather than its exponential
// skipped: the conditional exponential compiled to a branch per element, which cost the chunk
// stream 10 points of copy on the H200. A double exponential takes the registers of several: two
// at once spilled the double row kernels, so double keeps the branch.
template <class T, int V>
__device__ __forceinline__ void exp_pack(Pack<T, V>& p, T m) {
  const T ninf = neg_inf(T());
#pragma unroll
  for (int e = 0; e < V; ++e) {
    if constexpr (sizeof(T) == 4) {
      p.v[e] = exp_t(p.v[e] == ninf ? ninf : p.v[e] - m);
    } else {
      p.v[e] = (p.v[e] == ninf) ? T(0) : exp_t(p.v[e] - m);
    }
  }
}

template <class T, int V>
__device__ __forceinline__ T max_pack(const Pack<T, V>& p, T m) {
#pragma unroll
  for (int e = 0; e < V; ++e) m = max_t(m, p.v[e]);
  return m;
}

// Sum of a pack of exponentials (each in [0, 1]), returned in double. A float pack is summed
// pairwise in float first (at most 2 roundings of 2^-24 on 4 terms), then widened: the running
// sum stays double, as the accuracy contract asks, with one conversion per 4 elements.
template <class T, int V>
__device__ __forceinline__ double sum_pack(const Pack<T, V>& p) {
  if constexpr (V == 4) {
    return static_cast<double>((p.v[0] + p.v[1]) + (p.v[2] + p.v[3]));
  } else if constexpr (V == 2) {
    return static_cast<double>(p.v[0] + p.v[1]);
  } else {
    return static_cast<double>(p.v[0]);
  }
}

template <class T, int V>
__device__ __forceinline__ Pack<T, V> scale_pack(const Pack<T, V>& p, T f) {
  Pack<T, V> o;
#pragma unroll
  for (int e = 0; e < V; ++e) o.v[e] = p.v[e] * f;
  return o;
}

// Online update of (m, s) by one pack: the pack's maximum first (one rescale at most), then
// its exponentials.
template <class T, int V>
__device__ __forceinline__ void ms_accumulate(MS<T>& st, const Pack<T, V>& p) {
  const T vm = max_pack(p, neg_inf(T()));
  if (vm > st.m) {
    st.s = st.s * static_cast<double>(exp_t(st.m - vm));
    st.m = vm;
  }
  Pack<T, V> e = p;
  exp_pack(e, st.m);
  st.s += sum_pack(e);
}

// Final values of a row: `bad` (m = +-inf) gives NaN, otherwise exp(x - m) * inv (a NaN factor
// where bad, so that no element takes a branch).
template <class T, int V>
__device__ __forceinline__ Pack<T, V> finalize(const Pack<T, V>& p, T m, T inv, bool bad) {
  Pack<T, V> o;
  const T f = bad ? quiet_nan(T()) : inv;
#pragma unroll
  for (int e = 0; e < V; ++e) o.v[e] = exp_t(p.v[e] - m) * f;
  return o;
}

template <class T>
struct RowScale {
  T m;
  T inv;
  bool bad;
};

template <class T>
__device__ __forceinline__ RowScale<T> row_scale(const MS<T>& tot) {
  return RowScale<T>{tot.m, static_cast<T>(1.0 / tot.s), is_inf(tot.m)};
}

// Single 16-byte (or one-element) accesses.
template <class T, int V>
__device__ __forceinline__ Pack<T, V> load_pack(const T* p) {
  Pack<T, V> v;
  if constexpr (V == 4 && sizeof(T) == 4) {
    const float4 a = *reinterpret_cast<const float4*>(p);
    v.v[0]         = a.x;
    v.v[1]         = a.y;
    v.v[2]         = a.z;
    v.v[3]         = a.w;
  } else if constexpr (V == 2 && sizeof(T) == 8) {
    const double2 a = *reinterpret_cast<const double2*>(p);
    v.v[0]          = a.x;
    v.v[1]          = a.y;
  } else {
    static_assert(V == 1, "access width");
    v.v[0] = *p;
  }
  return v;
}

// 16-byte stores in PTX: left to the optimizer, the stores of some paths came out as four
// 4-byte stores.
template <class T, int V>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, V>& v) {
  if constexpr (V == 4 && sizeof(T) == 4) {
    asm volatile(
        "{\n .reg .u64 g;\n cvta.to.global.u64 g, %0;\n"
        " st.global.v4.f32 [g], {%1, %2, %3, %4};\n}\n" ::"l"(p),
        "f"(v.v[0]), "f"(v.v[1]), "f"(v.v[2]), "f"(v.v[3])
        : "memory");
  } else if constexpr (V == 2 && sizeof(T) == 8) {
    asm volatile(
        "{\n .reg .u64 g;\n cvta.to.global.u64 g, %0;\n"
        " st.global.v2.f64 [g], {%1, %2};\n}\n" ::"l"(p),
        "d"(v.v[0]), "d"(v.v[1])
        : "memory");
  } else {
    static_assert(V == 1, "access width");
    *p = v.v[0];
  }
}

// Shared-memory slot read (same width as the global access).
template <class T, int V>
__device__ __forceinline__ void store_slot(Pack<T, V>* slot, const Pack<T, V>& v) {
  if constexpr (V == 4 && sizeof(T) == 4) {
    *reinterpret_cast<float4*>(slot) = make_float4(v.v[0], v.v[1], v.v[2], v.v[3]);
  } else if constexpr (V == 2 && sizeof(T) == 8) {
    *reinterpret_cast<double2*>(slot) = make_double2(v.v[0], v.v[1]);
  } else {
    *reinterpret_cast<T*>(slot) = v.v[0];
  }
}

template <class T, int V>
__device__ __forceinline__ Pack<T, V> load_slot(const Pack<T, V>* slot) {
  return load_pack<T, V>(reinterpret_cast<const T*>(slot));
}

// Asynchronous global -> shared copies (sm_80+). 16-byte copies bypass L1 (.cg).
template <int BYTES>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(gmem), "n"(BYTES) : "memory");
  }
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Wait until at most n (0..7, a constant after unrolling) of this thread's groups are pending.
__device__ __forceinline__ void cp_async_wait_upto(int n) {
  switch (n) {
    case 0: cp_async_wait<0>(); break;
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    case 5: cp_async_wait<5>(); break;
    case 6: cp_async_wait<6>(); break;
    default: cp_async_wait<7>(); break;
  }
}

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse

#endif
