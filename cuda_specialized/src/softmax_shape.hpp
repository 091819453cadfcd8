// Private: what a softmax plan launches (kernel, shared memory, residency), shared by the choice of
// the plan (softmax_plan.cu) and its launch (softmax_launch.cu).
#ifndef SOFTFUSE_CUDA_SPECIALIZED_SOFTMAX_SHAPE_HPP
#define SOFTFUSE_CUDA_SPECIALIZED_SOFTMAX_SHAPE_HPP

#include <algorithm>
#include <cstdint>

#include "runtime.hpp"
#include "softmax_kernels.hpp"
#include "softmax_plan.hpp"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

template <class T>
constexpr int vec_width() {
  return 16 / static_cast<int>(sizeof(T));
}

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

inline int row_group_threads(const Plan& plan) { return plan.row_threads > 0 ? plan.row_threads : plan.threads; }

// The compiled row kernel of a plan with kr vectors per thread in registers; nullptr where none.
template <class T>
const void* row_func(const Plan& plan, int kr) {
  if (plan.grid_join) {
    if (plan.row_threads != 0 && plan.row_threads != plan.threads) return nullptr;
    return group_row_kernel<T>(plan.vec, plan.threads, kr);
  }
  if (plan.cluster > 1) {
    if (plan.row_threads != 0 && plan.row_threads != plan.threads) return nullptr;
    return cluster_row_kernel<T>(plan.vec, plan.threads, kr);
  }
  return block_row_kernel<T>(plan.vec, plan.threads, row_group_threads(plan), kr);
}

// Dynamic shared memory of a row plan's blocks with the given lookahead.
template <class T>
std::int64_t row_smem_bytes(const Plan& plan, int lookahead) {
  const RowSlots rs = row_slots(plan.ks, plan.threads, lookahead);
  return static_cast<std::int64_t>(rs.nphys) * rs.gs * plan.threads * plan.vec * static_cast<std::int64_t>(sizeof(T));
}

// Resident row groups (blocks, clusters or grid groups) of a row plan with the given lookahead
// (0 if it does not fit).
template <class T>
int row_resident(const DeviceInfo& di, const Plan& plan, const void* f, int lookahead) {
  const std::int64_t smem = row_smem_bytes<T>(plan, lookahead);
  if (plan.grid_join) return max_active(di, f, plan.threads, smem, 0) / plan.cluster;
  return max_active(di, f, plan.threads, smem, plan.cluster > 1 ? plan.cluster : 0);
}

// Lookahead only for the register-extended kernel (rows beyond the shared memory of 16 blocks),
// and only where it costs no residency: measured on the H100 it helped there (1M-column rows,
// 65.5% -> 69.9% of copy) and nowhere else (92% -> 88% on 192 KB rows).
template <class T>
int resolve_lookahead(const DeviceInfo& di, const Plan& plan, const void* f) {
  if (plan.lookahead >= 0) return plan.lookahead;
  if (plan.kr == 0 || plan.cluster == 1) return 0;
  const int without = row_resident<T>(di, plan, f, 0);
  return (without > 0 && row_resident<T>(di, plan, f, 1) >= without) ? 1 : 0;
}
// Shape of a stream plan: vectors per thread and chunk, chunks per row, blocks; false if the
// row has more chunks than the lead allows (the waits could deadlock) or the grid cannot be
// resident.
template <class T>
struct StreamShape {
  int kpt              = 0;
  std::int64_t nchunks = 0, blocks = 0, smem = 0;
  const void* f = nullptr;
};

template <class T>
bool stream_shape(const DeviceInfo& di, const Plan& plan, std::int64_t cols, StreamShape<T>& sh) {
  if (!di.cooperative || plan.vec <= 0 || plan.threads <= 0 || plan.chunk <= 0 || plan.chunk % plan.vec != 0)
    return false;
  sh.kpt                   = static_cast<int>(ceil_div(plan.chunk / plan.vec, plan.threads));
  const std::int64_t chunk = static_cast<std::int64_t>(sh.kpt) * plan.threads * plan.vec;
  sh.nchunks               = ceil_div(cols, chunk);
  sh.f                     = stream_kernel<T>(plan.vec, plan.threads, plan.buffers, plan.lead, sh.kpt, sh.nchunks);
  if (sh.f == nullptr) return false;
  sh.smem                     = plan.buffers * chunk * static_cast<std::int64_t>(sizeof(T));
  const std::int64_t resident = max_active(di, sh.f, plan.threads + 32, sh.smem, 0);  // + the control warp
  sh.blocks                   = plan.grid > 0 ? std::min<std::int64_t>(plan.grid, resident) : resident;
  // a row spans at most lead - 1 steps of the grid (+1 chunk): its partials are all published
  // one step before any block waits for them
  return sh.blocks > 0 && sh.nchunks <= (plan.lead - 1) * sh.blocks + 1;
}

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse

#endif
