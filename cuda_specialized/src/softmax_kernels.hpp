// Private: kernel argument blocks and the lookup of compiled kernel instantiations.
// Host-visible (no device code); shared by the kernel sources, the plan and the launches.
#ifndef SOFTFUSE_CUDA_SPECIALIZED_SOFTMAX_KERNELS_HPP
#define SOFTFUSE_CUDA_SPECIALIZED_SOFTMAX_KERNELS_HPP

#include <cstdint>

namespace softfuse {
namespace cuda_specialized {
namespace impl {

// Partial reduction of (part of) a row: running maximum m and sum of exp(x - m) in double.
template <class T>
struct MS {
  T m;
  double s;
};

// Short rows: a group of G lanes (G | 32) per row, the row in registers.
template <class T>
struct WarpArgs {
  const T* x;
  T* y;
  std::int64_t ldx, ldy, rows, cols;
  std::int64_t skew;  // rows the first step starts before row 0 (masked), so that every step starts where x's rows
                      // meet a 256-byte boundary
};

#if defined(__CUDACC__)
#define SOFTFUSE_CUDA_HD __host__ __device__
#else
#define SOFTFUSE_CUDA_HD
#endif

// How the blocks holding one row join their partial (m, s): one block (or warp) per row, the
// blocks of a thread-block cluster through distributed shared memory, or a group of blocks of
// a cooperative grid through global memory.
enum class RowJoin { block, cluster, grid };

// Rows held on chip by one warp, one block, a thread-block cluster or a group of blocks
// (persistent over rows).
template <class T>
struct RowArgs {
  const T* x;
  T* y;
  std::int64_t ldx, ldy, rows, cols;
  int ks;         // vectors per thread held in shared memory (the kernel's KR more in registers)
  int lookahead;  // 1: one spare slot group, so the next row's first group loads during the join
  // RowJoin::grid only: blocks per row, and each row's published partials and their flags
  // ([rows][group]; the flags zero before the launch)
  int group;
  MS<T>* xparts;
  unsigned* xflags;
};

// Shared-memory vectors of a row kernel thread: `stages` commit groups of gs vectors (the
// last ones possibly empty), na of them non-empty, rotating over nphys = na + lookahead
// physical groups.
struct RowSlots {
  int stages, gs, na, nphys;
};
SOFTFUSE_CUDA_HD constexpr int row_stages(int threads) { return threads == 512 ? 8 : 4; }
SOFTFUSE_CUDA_HD constexpr RowSlots row_slots(int ks, int threads, int lookahead) {
  const int st = row_stages(threads);
  const int gs = ks > 0 ? (ks + st - 1) / st : 0;
  const int na = gs > 0 ? (ks + gs - 1) / gs : 0;
  return RowSlots{st, gs, na, gs > 0 ? na + (lookahead ? 1 : 0) : 0};
}

// Rows too long to stay on chip: partial (m, s) per chunk, optional combine, then write.
template <class T>
struct SplitArgs {
  const T* x;
  T* y;
  std::int64_t ldx, ldy;
  std::int64_t row0;  // first row of this group of rows
  std::int64_t cols;
  std::int64_t chunk;    // elements per block (a multiple of the vector width)
  std::int64_t nchunks;  // chunks per row
  MS<T>* parts;          // [rows of the group][nchunks]
  MS<T>* tot;            // [rows of the group], written by the combine kernel
  std::int64_t nparts;   // partials per row the write kernel joins: nchunks (parts) or 1 (tot)
};

// Long rows as a stream of chunks through a persistent cooperative grid (softmax_stream.cu).
template <class T>
struct StreamArgs {
  const T* x;
  T* y;
  std::int64_t ldx, ldy, rows, cols;
  int kpt;                    // vectors per thread and chunk
  std::int64_t nchunks;       // chunks per row
  unsigned long long* parts;  // [rows][nchunks] tagged partial of each chunk, kStreamSlotWords
                              // words each, none tagged with this call's epoch before the launch
  unsigned epoch;             // > 0
};
constexpr int kStreamSlotWords = 4;

constexpr int kWarpBlockThreads = 128;
// Rows of one vector per lane go kWarpRowBatch at a time per lane group: kernels alone, % of the same-run copy
// (perf/results/*/cuda_warp_batch.json), batches of 1 / 2 / 4: H100 4194304x32 99.5 / 100.0 / 100.2, 2097152x128
// 97.7 / 98.3 / 99.2; H200 98.6 / 100.1 / 98.7 and 97.3 / 98.0 / 97.1. Rows of two vectors per lane (1048576x256) in
// batches of 2: H100 98.4 -> 99.2, H200 98.3 -> 97.5; they keep 1.
constexpr int kWarpRowBatch         = 2;
constexpr int kSplitThreads         = 256;
constexpr int kStreamThreads        = 512;
constexpr int kRowRegisterVectors   = 8;  // KR of the register-extended cluster and group kernels
constexpr int kBlockRegisterVectors = 4;  // KR of the register-extended 128-thread block kernel

// The compiled instantiations; nullptr where none matches.
// batch: rows per lane group and step (1, or kWarpRowBatch for 16-byte vectors where a lane holds one
// vector of a row)
template <class T>
const void* warp_kernel(int vec, int group, int chunks, int batch);
template <class T>
// group: threads per row; kr: vectors per thread in registers (0, or kBlockRegisterVectors
// with 128-thread blocks of one row)
const void* block_row_kernel(int vec, int threads, int group, int kr);
template <class T>
const void* cluster_row_kernel(int vec, int threads, int kr);
template <class T>
const void* group_row_kernel(int vec, int threads, int kr);
// buffers/lead: chunks a block holds in shared memory / how many steps ahead of its write it
// reduces a chunk (4/2, 5/3 and 6/4 compiled); kpt: vectors per thread and chunk (at most those of the chunk the
// plans take for these buffers); nchunks: the row's chunks, which pick the join
template <class T>
const void* stream_kernel(int vec, int threads, int buffers, int lead, int kpt, std::int64_t nchunks);
// A chunk stream's join: its control warp loads kStreamJoinNarrow partials per lane and round trip
// (128 per round trip), kStreamJoinWide for rows of more chunks (256, one round trip up to 256
// chunks; H100, kernels alone: 8 MB rows 73 -> 81 % of copy). The wide join's registers cost rows
// of fewer chunks 0.5-2.5 % (perf/results/h100/cuda_stream_join_ab.json).
constexpr int kStreamJoinNarrow = 4;
constexpr int kStreamJoinWide   = 8;
template <class T>
const void* split_partial_kernel(int vec);
template <class T>
const void* split_combine_kernel();
template <class T>
const void* split_write_kernel(int vec);

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse

#endif
