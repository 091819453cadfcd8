// Private: rows held on chip by one block (RowJoin::block), spread over the blocks of a
// thread-block cluster (RowJoin::cluster, sm_90) or over a group of blocks of a cooperative grid
// (RowJoin::grid), persistent over rows.
//
// Layout. The row's vectors (V elements each) are dealt out block slice by block slice:
// vector j (0 <= j < KR + ks) of thread t in cluster rank b has index
// ((b*(KR + ks) + j)*GT + t), GT the threads per row, so each j is a coalesced sweep of GT
// vectors. Vectors j < KR live in registers, the others in shared memory slot (j - KR)*GT + t
// of the row group's slots, private to the thread: no barrier is needed between a thread's
// copies, its reads and its rewrites.
//
// Pipeline per row (HBM sees one read and one write of every element):
//   A  the shared-memory vectors arrive in NSTAGE commit groups; as each group lands, the
//      thread takes the group's maximum m_g, replaces each element by exp(x - m_g) in place
//      and adds them up (s_g); (m_g, s_g) joins the thread's running (m, s);
//   B  join (m, s) over the block (shuffles + one __syncthreads), then over the cluster: each
//      block pushes its partial into every block's shared memory with st.async, counted by an
//      mbarrier there (no cluster-wide barrier per row), and every block joins the C partials
//      in rank order, so all blocks hold the bitwise-same row maximum M and sum S; a grid
//      group does the same through global memory (a partial and a release flag per block and
//      row, acquired by warp 0 of every block of the row, then one more __syncthreads);
//   D  y = exp(x - m_g) * (exp(m_g - M) / S): one multiply per element, one exp per group;
//      right behind each write the copy of the same vector of the block's next row starts
//      into the freed slot (registers first).
#ifndef SOFTFUSE_CUDA_SPECIALIZED_SOFTMAX_ROW_KERNEL_CUH
#define SOFTFUSE_CUDA_SPECIALIZED_SOFTMAX_ROW_KERNEL_CUH

#include <cooperative_groups.h>

#include "softmax_common.cuh"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

// Commit groups per row: finer groups overlap more of the arithmetic with the arrivals; 256-thread
// blocks (5 per SM, 48 registers) use 4 to stay clear of spills.
template <int NT>
__host__ __device__ constexpr int row_stages() {
  return row_stages(NT);
}

// Blocks per SM the register allocation must allow (shared memory usually limits first). The
// 512-thread register-extended kernel (one block per SM) gets all the registers it wants, the
// 256-thread one (grid groups, two blocks per SM) half of them; the 128-thread one keeps 8
// blocks per SM (its smaller shared-memory share is the point of it).
template <int NT, int KR>
constexpr int row_min_blocks() {
  if (KR > 0 && NT >= 256) return NT >= 512 ? 1 : 2;
  return NT == 128 ? 8 : (NT == 256 ? 5 : 2);
}

__device__ __forceinline__ void st_release_gpu(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Join over the C (<= 32) blocks of a row in a cooperative grid (all co-resident): block
// `rank` publishes its partial, then warp 0 of every block waits for each block's flag (lane q
// for block q) and joins the C partials in the same lane order, so every block gets the
// bitwise-same (M, S); `bcast` hands it to the block (one __syncthreads). Each flag of a call
// is written once (one slot per row and block), so a zeroed array needs no reset.
template <class T>
__device__ __forceinline__ MS<T> grid_group_join(MS<T> v, MS<T>* parts, unsigned* flags, int C, int rank,
                                                 MS<T>* bcast) {
  if (threadIdx.x == 0) {
    parts[rank] = v;
    st_release_gpu(&flags[rank], 1u);
  }
  if (threadIdx.x < 32) {
    const int q = threadIdx.x;
    MS<T> w     = ms_identity<T>();
    if (q < C) {
      while (ld_acquire_gpu(&flags[q]) == 0) {
      }
      // from L2: an L1 line may hold a neighbouring slot's line from an earlier row
      w = MS<T>{__ldcg(&parts[q].m), __ldcg(&parts[q].s)};
    }
    w = warp_join<32>(w);
    if (q == 0) *bcast = w;
  }
  __syncthreads();
  return *bcast;
}

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ unsigned cluster_map(unsigned addr, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
__device__ __forceinline__ void mbar_init(unsigned addr, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(addr), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned addr, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(addr), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait_parity(unsigned addr, unsigned parity) {
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n .reg .pred P;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P, [%1], %2;\n"
        " selp.u32 %0, 1, 0, P;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  }
}
// 16 bytes into another block's shared memory, completing 16 transaction bytes on its mbarrier.
__device__ __forceinline__ void st_async_16(unsigned remote_addr, double a, double b, unsigned remote_mbar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b64 [%0], {%1, %2}, [%3];\n" ::"r"(remote_addr),
      "l"(__double_as_longlong(a)), "l"(__double_as_longlong(b)), "r"(remote_mbar)
      : "memory");
}
#endif

// GT threads per row: GT = NT (a block, a cluster or a grid group per row) or GT = 32 (each
// warp of the block its own row, its own slots and its own row sequence; no block barrier).
template <class T, int V, int NT, int KR, RowJoin J, int GT = NT>
__global__ void __launch_bounds__(NT, row_min_blocks<NT, KR>()) softmax_row_kernel(const RowArgs<T> a) {
  constexpr bool CLUSTERED = J == RowJoin::cluster;
  static_assert(GT == NT || (GT == 32 && J == RowJoin::block), "rows per block: one, or one per warp");
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 900)
  if constexpr (CLUSTERED) {
    __trap();  // never launched: plans use clusters only with sm_90 code
    return;
  }
#endif
  using P          = Pack<T, V>;
  constexpr int NW = NT / 32;
  constexpr int NS = row_stages<NT>();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  P* const buf = reinterpret_cast<P*>(smem_raw);
  __shared__ MS<T> red[2][NW];
  // cluster exchange: partial (m as double, s) of each rank, two rows deep, and their mbarriers
  __shared__ __align__(16) double recv[2][16][2];
  __shared__ __align__(8) unsigned long long mbar[2];
  // grid groups: the row's joined (M, S), from warp 0 to the block
  __shared__ MS<T> gtot;

  constexpr int NG = NT / GT;  // rows in flight per block
  const int lane   = threadIdx.x & 31;
  const int t      = threadIdx.x % GT;  // thread within the row's group
  const int grp    = threadIdx.x / GT;
  int C            = 1;  // blocks in the cluster
  int rank         = 0;
  std::int64_t cid = static_cast<std::int64_t>(blockIdx.x) * NG + grp;
  std::int64_t ncl = static_cast<std::int64_t>(gridDim.x) * NG;
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  if constexpr (CLUSTERED) {
    namespace cg               = cooperative_groups;
    const cg::cluster_group cl = cg::this_cluster();
    C                          = static_cast<int>(cl.num_blocks());
    rank                       = static_cast<int>(cl.block_rank());
    cid                        = blockIdx.x / C;
    ncl                        = gridDim.x / C;
    if (t == 0) {
      mbar_init(smem_u32(&mbar[0]), 1);
      mbar_init(smem_u32(&mbar[1]), 1);
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    cl.sync();  // every block's mbarriers exist before anyone sends
  }
#endif
  if constexpr (J == RowJoin::grid) {
    C    = a.group;
    rank = static_cast<int>(blockIdx.x % static_cast<unsigned>(C));
    cid  = blockIdx.x / C;
    ncl  = gridDim.x / C;
  }
  (void)C;
  (void)lane;
  (void)recv;
  (void)mbar;
  (void)gtot;
  const int ks            = a.ks;
  const int kt            = KR + ks;
  const std::int64_t nvec = a.cols / V;
  const std::int64_t base = static_cast<std::int64_t>(rank) * kt * GT + t;
  const int nvt = base < nvec ? static_cast<int>(min(static_cast<std::int64_t>(kt), (nvec - base + GT - 1) / GT)) : 0;
  const int nvs = max(0, nvt - KR);                               // valid shared-memory vectors of this thread
  const std::int64_t stride = static_cast<std::int64_t>(GT) * V;  // elements between j and j+1
  // Shared-memory vectors in NS logical groups of gs (logical vector j in group j / gs); the
  // na non-empty groups rotate over nphys physical groups: with the spare one (lookahead), the
  // next row's group 0 is loaded before the join. Each row group of the block has its slots.
  const RowSlots rs = row_slots(ks, NT, a.lookahead);
  const int gs      = rs.gs;
  const int nphys   = rs.nphys;
  P* const slots    = buf + static_cast<std::int64_t>(grp) * nphys * gs * GT;
  const T ninf      = neg_inf(T());
  // slot of vector i (0 <= i < gs) of logical group g when the row's rotation offset is off
  auto slot = [&](int g, int i, int off) -> P* {
    int ph = g + off;
    if (ph >= nphys) ph -= nphys;
    return &slots[(ph * gs + i) * GT + t];
  };
  // valid vectors of logical group g
  auto group_len = [&](int g) { return max(0, min(gs, nvs - g * gs)); };

  P regs[KR > 0 ? KR : 1];

  auto issue_group = [&](const T* xr, int g, int off) {
    const int n = group_len(g);
    for (int i = 0; i < n; ++i) cp_async<sizeof(P)>(slot(g, i, off), xr + (KR + g * gs + i) * stride);
  };

  // Prologue: the first row, registers first, then NS commit groups.
  int off = 0;
  if (cid < a.rows) {
    const T* xr = a.x + cid * a.ldx + base * V;
#pragma unroll
    for (int j = 0; j < KR; ++j)
      if (j < nvt) regs[j] = load_pack<T, V>(xr + j * stride);
#pragma unroll
    for (int g = 0; g < NS; ++g) {
      issue_group(xr, g, off);
      cp_async_commit();
    }
  }

  int k = 0;  // rows done by this row group
  for (std::int64_t r = cid; r < a.rows; r += ncl, ++k) {
    const int p           = k & 1;
    const std::int64_t rn = r + ncl;
    const bool has_next   = rn < a.rows;
    const T* xn           = a.x + (has_next ? rn : r) * a.ldx + base * V;

    // A: per-group maximum, exponentials in place, sums.
    MS<T> st = ms_identity<T>();
    T mreg   = ninf;
    if constexpr (KR > 0) {
#pragma unroll
      for (int j = 0; j < KR; ++j)
        if (j < nvt) mreg = max_pack(regs[j], mreg);
      double s = 0.0;
#pragma unroll
      for (int j = 0; j < KR; ++j) {
        if (j < nvt) {
          exp_pack(regs[j], mreg);
          s += sum_pack(regs[j]);
        }
      }
      st = ms_join(st, MS<T>{mreg, s});
    }
    T mg[NS];
#pragma unroll
    for (int g = 0; g < NS; ++g) {
      cp_async_wait_upto(NS - 1 - g);
      const int n = group_len(g);
      T m         = ninf;
#pragma unroll 4
      for (int i = 0; i < n; ++i) m = max_pack(load_slot<T, V>(slot(g, i, off)), m);
      double s = 0.0;
#pragma unroll 2
      for (int i = 0; i < n; ++i) {
        P* sp = slot(g, i, off);
        P v   = load_slot<T, V>(sp);
        exp_pack(v, m);
        store_slot<T, V>(sp, v);
        s += sum_pack(v);
      }
      mg[g] = m;
      st    = ms_join(st, MS<T>{m, s});
    }
    // Lookahead: the next row's group 0 into the spare physical group, before the join.
    const int off_next = a.lookahead ? (off + nphys - 1) % max(nphys, 1) : 0;
    if (a.lookahead) {
      if (has_next) issue_group(xn, 0, off_next);
      cp_async_commit();
    }

    // B: block, then cluster.
    MS<T> tot;
    if constexpr (GT == 32) {
      tot = warp_join<32>(st);
    } else {
      tot = block_join<NT>(st, red[p]);
    }
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
    if constexpr (CLUSTERED) {
      const unsigned bar = smem_u32(&mbar[p]);
      if (t == 0) mbar_arrive_expect_tx(bar, 16u * static_cast<unsigned>(C));
      if (t < C) {
        st_async_16(cluster_map(smem_u32(&recv[p][rank][0]), t), static_cast<double>(tot.m), tot.s,
                    cluster_map(bar, t));
      }
      mbar_wait_parity(bar, static_cast<unsigned>(k >> 1) & 1u);
      const int q = lane & 15;  // each aligned group of 16 lanes holds all C partials
      tot         = warp_join<16>(q < C ? MS<T>{static_cast<T>(recv[p][q][0]), recv[p][q][1]} : ms_identity<T>());
    }
#endif
    if constexpr (J == RowJoin::grid) {
      const std::int64_t slot0 = r * C;
      tot                      = grid_group_join(tot, a.xparts + slot0, a.xflags + slot0, C, rank, &gtot);
    }
    const T M      = tot.m;
    const T inv    = static_cast<T>(1.0 / tot.s);
    const bool bad = is_inf(M);
    const T nan    = quiet_nan(T());

    // D: write this row, refilling each freed slot with the next row's vector.
    T* yr = a.y + r * a.ldy + base * V;
    if constexpr (KR > 0) {
      const T f = bad ? nan : exp_t(mreg - M) * inv;
#pragma unroll
      for (int j = 0; j < KR; ++j) {
        if (j < nvt) {
          store_pack<T, V>(yr + j * stride, scale_pack(regs[j], f));
          if (has_next) regs[j] = load_pack<T, V>(xn + j * stride);
        }
      }
    }
#pragma unroll
    for (int g = 0; g < NS; ++g) {
      const int n = group_len(g);
      const T f   = bad ? nan : exp_t(mg[g] - M) * inv;
      // with lookahead the slots of group g take the next row's group g + 1
      const int gn = a.lookahead ? g + 1 : g;
      const int nn = (has_next && gn < NS) ? group_len(gn) : 0;
#pragma unroll 2
      for (int i = 0; i < n; ++i) {
        P* sp     = slot(g, i, off);
        const P v = load_slot<T, V>(sp);
        store_pack<T, V>(yr + (KR + g * gs + i) * stride, scale_pack(v, f));
        if (i < nn) cp_async<sizeof(P)>(sp, xn + (KR + gn * gs + i) * stride);
      }
      if (gn < NS) cp_async_commit();
    }
    off = off_next;
  }
  cp_async_wait<0>();
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  if constexpr (CLUSTERED) {
    // Nothing may still be addressed to a block that has left.
    cooperative_groups::this_cluster().sync();
  }
#endif
}

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse

#endif
