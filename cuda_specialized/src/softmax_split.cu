// Rows beyond on-chip capacity (and long rows without clusters): two passes per group of rows
// small enough to stay in L2 between them. Pass 1 writes a partial (m, s) per chunk; an
// optional combine joins a row's partials when there are many; pass 2 joins them again (the
// same order in every block of the row) and writes its chunk, chunks taken last-read-first.
// With sm_90 code each pass is a programmatic dependent launch of the one before (run_split): its
// blocks are scheduled while that pass's last blocks run, and wait for it before touching memory.
#include "runtime.hpp"
#include "softmax_common.cuh"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

constexpr int kSplitUnroll = 4;

template <class T, int V, int NT>
__global__ void __launch_bounds__(NT) softmax_split_partial_kernel(const SplitArgs<T> a) {
  using P = Pack<T, V>;
  __shared__ MS<T> red[NT / 32];
  grid_dependency_wait();  // a dependent launch: the pass before (or the stream's earlier work) is done
  allow_dependent_launch();
  const std::int64_t r    = a.row0 + blockIdx.y;
  const T* xr             = a.x + r * a.ldx;
  const std::int64_t nvec = a.cols / V;
  const std::int64_t cv   = a.chunk / V;
  const std::int64_t v0   = static_cast<std::int64_t>(blockIdx.x) * cv;
  const std::int64_t v1   = min(v0 + cv, nvec);
  const T ninf            = neg_inf(T());
  MS<T> st                = ms_identity<T>();
  for (std::int64_t i = v0 + threadIdx.x; i < v1; i += NT * kSplitUnroll) {
    P v[kSplitUnroll];
#pragma unroll
    for (int u = 0; u < kSplitUnroll; ++u) {
      const std::int64_t idx = i + static_cast<std::int64_t>(u) * NT;
      if (idx < v1) {
        v[u] = load_pack<T, V>(xr + idx * V);
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) v[u].v[e] = ninf;
      }
    }
#pragma unroll
    for (int u = 0; u < kSplitUnroll; ++u) ms_accumulate(st, v[u]);
  }
  st = block_join<NT>(st, red);
  if (threadIdx.x == 0) a.parts[static_cast<std::int64_t>(blockIdx.y) * a.nchunks + blockIdx.x] = st;
}

template <class T, int NT>
__global__ void __launch_bounds__(NT) softmax_split_combine_kernel(const SplitArgs<T> a) {
  __shared__ MS<T> red[NT / 32];
  grid_dependency_wait();  // a dependent launch: the pass before (or the stream's earlier work) is done
  allow_dependent_launch();
  const MS<T>* src = a.parts + static_cast<std::int64_t>(blockIdx.x) * a.nchunks;
  MS<T> st         = ms_identity<T>();
  for (std::int64_t i = threadIdx.x; i < a.nchunks; i += NT) st = ms_join(st, src[i]);
  st = block_join<NT>(st, red);
  if (threadIdx.x == 0) a.tot[blockIdx.x] = st;
}

template <class T, int V, int NT>
__global__ void __launch_bounds__(NT) softmax_split_write_kernel(const SplitArgs<T> a) {
  using P = Pack<T, V>;
  __shared__ MS<T> red[NT / 32];
  grid_dependency_wait();  // a dependent launch: the pass before (or the stream's earlier work) is done
  allow_dependent_launch();
  const std::int64_t rr = blockIdx.y;
  const std::int64_t r  = a.row0 + rr;
  const MS<T>* src      = (a.nparts == 1) ? a.tot + rr : a.parts + rr * a.nchunks;
  MS<T> st              = ms_identity<T>();
  for (std::int64_t i = threadIdx.x; i < a.nparts; i += NT) st = ms_join(st, src[i]);
  const RowScale<T> sc = row_scale(block_join<NT>(st, red));

  const T* xr             = a.x + r * a.ldx;
  T* yr                   = a.y + r * a.ldy;
  const std::int64_t nvec = a.cols / V;
  const std::int64_t cv   = a.chunk / V;
  const std::int64_t c    = a.nchunks - 1 - blockIdx.x;  // the chunks pass 1 read last, first
  const std::int64_t v0   = c * cv;
  const std::int64_t v1   = min(v0 + cv, nvec);
  for (std::int64_t i = v0 + threadIdx.x; i < v1; i += NT * kSplitUnroll) {
    P v[kSplitUnroll];
#pragma unroll
    for (int u = 0; u < kSplitUnroll; ++u) {
      const std::int64_t idx = i + static_cast<std::int64_t>(u) * NT;
      if (idx < v1) v[u] = load_pack<T, V>(xr + idx * V);
    }
#pragma unroll
    for (int u = 0; u < kSplitUnroll; ++u) {
      const std::int64_t idx = i + static_cast<std::int64_t>(u) * NT;
      if (idx < v1) store_pack<T, V>(yr + idx * V, finalize(v[u], sc.m, sc.inv, sc.bad));
    }
  }
}

template <class T>
const void* split_partial_kernel(int vec) {
  constexpr int VV = 16 / static_cast<int>(sizeof(T));
  if (vec == VV) return reinterpret_cast<const void*>(&softmax_split_partial_kernel<T, VV, kSplitThreads>);
  if (vec == 1) return reinterpret_cast<const void*>(&softmax_split_partial_kernel<T, 1, kSplitThreads>);
  return nullptr;
}

template <class T>
const void* split_combine_kernel() {
  return reinterpret_cast<const void*>(&softmax_split_combine_kernel<T, kSplitThreads>);
}

template <class T>
const void* split_write_kernel(int vec) {
  constexpr int VV = 16 / static_cast<int>(sizeof(T));
  if (vec == VV) return reinterpret_cast<const void*>(&softmax_split_write_kernel<T, VV, kSplitThreads>);
  if (vec == 1) return reinterpret_cast<const void*>(&softmax_split_write_kernel<T, 1, kSplitThreads>);
  return nullptr;
}

template const void* split_partial_kernel<float>(int);
template const void* split_partial_kernel<double>(int);
template const void* split_combine_kernel<float>();
template const void* split_combine_kernel<double>();
template const void* split_write_kernel<float>(int);
template const void* split_write_kernel<double>(int);

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse
