// Private: how a softmax call is carried out (regime and launch shape), host side only: chosen in
// softmax_plan.cu, launched by softmax_launch.hpp.
// Used by the entry points (softmax.cu), by tests/cuda_specialized/test_softmax_kernels.cu, which also checks
// forced plans, and by perf/cuda_specialized/softmax_kernels_bench.cu, which times them.
#ifndef SOFTFUSE_CUDA_SPECIALIZED_SOFTMAX_PLAN_HPP
#define SOFTFUSE_CUDA_SPECIALIZED_SOFTMAX_PLAN_HPP

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "runtime.hpp"

namespace softfuse {
namespace cuda_specialized {
namespace impl {

enum class Regime { warp, row, stream, split };

struct Plan {
  Regime regime = Regime::warp;
  int vec       = 1;  // elements per access: 16/sizeof(T) when aligned, else 1
  // warp: G lanes per row, NCH vectors per lane, rows per lane group and step
  int group  = 32;
  int chunks = 1;
  int batch  = 1;
  int skew   = -1;  // rows the first step starts before row 0 (WarpArgs::skew); -1: from x's alignment
  // row: cluster of `cluster` blocks of `threads`, ks vectors per thread in shared memory
  // and kr in registers; row_threads = 32: each warp of the block holds its own row;
  // grid_join: the `cluster` (2..32) blocks of a row are a group of a cooperative grid, joined
  // through global memory, not a hardware cluster
  int cluster     = 1;
  bool grid_join  = false;
  int threads     = 256;
  int row_threads = 0;   // 0: the whole block (or cluster) per row
  int lookahead   = -1;  // spare slot group for the next row's first group: -1 auto, 0 off, 1 on
  int ks          = 0;
  int kr          = 0;
  // stream: `threads` per block, chunk elements per block and step, `buffers` chunks per block in
  // shared memory, reduced `lead` steps before they are written (grid: blocks, 0 = resident)
  int buffers = 4;
  int lead    = 2;
  // split: elements per block, rows per pass pair (0: from the L2 size); dependent: each pass a programmatic
  // dependent launch of the one before (with sm_90 code), scheduled while that one finishes
  std::int64_t chunk      = 0;
  std::int64_t group_rows = 0;
  bool dependent          = true;
  // persistent grid (warp: blocks; row: rows in flight); 0: from the occupancy
  std::int64_t grid = 0;
  // row: false launches one row group per row (the hardware replaces finished blocks or
  // clusters) instead of a persistent grid that prefetches its next row into freed slots
  bool persistent = true;
};

template <class T>
struct Problem {
  const T* x;
  std::int64_t ldx;
  T* y;
  std::int64_t ldy;
  std::int64_t rows;
  std::int64_t cols;
};

// 16-byte accesses possible: cols, ldx, ldy multiples of the vector width, x and y aligned.
template <class T>
bool vector_ok(const Problem<T>& p);

// stream = false: the plan without the chunk-stream regime (the benchmark's comparison).
template <class T>
Plan make_plan(const DeviceInfo& di, const Problem<T>& p, bool stream = true);

// Largest row length (elements) taken in one pass (on-chip and chunk-stream regimes); longer rows
// take the split path.
template <class T>
std::int64_t onchip_max_cols(const DeviceInfo& di, bool vector);

// Regime thresholds (row bytes unless said otherwise), chosen from H100 measurements
// (perf/results/h100/cuda_softmax_kernels.json, docs/softmax_regimes.md):
//   <= kWarpMaxRowBytes       a warp (or a part of one) per row, row in registers
//   <= kWarpRowMaxBytes       a warp per row, row in shared memory, four rows per block
//   <= kRowNarrowBlockBytes   a block of 128 threads per row
//   <= kRowTargetBlockBytes   a block of 256 threads per row
//   <= kRowSingleBlockMinBytes  a cluster of 2 blocks per row
//   <= one SM's shared memory a block of 512 threads per row
//   longer, 16-byte aligned   a chunk stream (kStream* below), up to (lead - 1) x resident
//                             blocks + 1 chunks per row (10.6 MB on the H100)
// Longer rows the chunk streams do not take (not aligned, or beyond their reach on a GPU with
// few SMs):
//   <= kRowPairMaxBytes       a cluster of 2 blocks per row
//   <= kRowGroupMinBytes      the smallest cluster (4..16) whose blocks hold at most
//                             kRowClusterBlockBytes, else 16
//   longer                    a grid group of 256-thread blocks of at most kRowGroupBlockBytes
//                             (up to kRowGroupMaxBlocks, two per SM); beyond that clusters of 16
// Clustered blocks get 512 threads when they hold more than kRowClusterWideBytes. Without
// clusters (sm_80 code) every row up to one SM's shared memory takes one block, of 512 threads
// above kRowWideBlockBytes. Row plans without clusters launch a block per row (the hardware
// replaces finished blocks); clusters and grid groups are persistent and prefetch their next row.
// Chunk streams need cooperative launch (all blocks resident); rows neither takes: split path.
constexpr std::int64_t kWarpMaxRowBytes = 4096;
// Where the device outruns the chunk stream (kStreamMaxPeakBytesPerSm), 16-byte aligned rows past
// kWarpWideMinRowBytes up to kWarpMaxRowBytes take the warp kernel with a row per 128-thread block (groups of four
// warps, two vectors per lane). H200, kernels alone (perf/results/h200/cuda_warp_block_rows.json): 65536 x 1024 and
// 100000 x 1000 99.4 / 100.0 % of copy against 97.3 / 98.4 % for a warp per row; 512-column rows stay at a warp per row
// (97.7 % against 94.4 %), and 8-16 KB rows at the warp-row plan (131072 x 2048, 87381 x 3072, 65536 x 4096: 98.1 /
// 98.1 / 97.3 % against 95.1 / 96.6 / 95.2 % for G = 128). Not measured on the H100.
constexpr std::int64_t kWarpWideMinRowBytes    = 2048;
constexpr std::int64_t kWarpRowMaxBytes        = 16 * 1024;
constexpr std::int64_t kRowNarrowBlockBytes    = 32 * 1024;
constexpr std::int64_t kRowWideBlockBytes      = 64 * 1024;
constexpr std::int64_t kRowTargetBlockBytes    = 64 * 1024;
constexpr std::int64_t kRowSingleBlockMinBytes = 128 * 1024;
constexpr std::int64_t kRowPairMaxBytes        = 256 * 1024;
constexpr std::int64_t kRowClusterBlockBytes   = 64 * 1024;
constexpr std::int64_t kRowClusterWideBytes    = 96 * 1024;
constexpr std::int64_t kRowGroupMinBytes       = 16 * kRowClusterWideBytes;
constexpr std::int64_t kRowGroupBlockBytes     = 128 * 1024;
constexpr int kRowGroupMaxBlocks               = 32;  // the lanes of the warp that joins the partials
constexpr std::int64_t kSplitChunkBytes        = 64 * 1024;
// Split rows go in groups that a third of L2 holds where such a group has at least kSplitMinL2Rows rows
// (pass 2 reads it back from L2); longer rows go in one group of all rows (every group costs two or three
// launches; H100, 32 x 8388608: 47 % of copy in groups of one row, 58 % of 4, 65 % in one group of 32), of at
// most kSplitMaxPartials partials.
constexpr std::int64_t kSplitMinL2Rows   = 4;
constexpr std::int64_t kSplitMaxPartials = std::int64_t(1) << 20;
// Chunk streams: chunks of kStreamLongChunkBytes in 5 buffers per block, reduced 3 steps ahead (a row
// may span two steps of the grid), on all resident blocks. Where the device outruns the stream
// (kStreamMaxPeakBytesPerSm below), chunks of kStreamShortChunkBytes in 4 buffers, reduced 2 steps
// ahead, on a grid of whole rows per step (the largest multiple of the row's chunks the resident
// blocks hold) for rows of at most kStreamAlignedMaxChunks chunks where that keeps at least
// kStreamAlignedMinShare % of the blocks, else on all resident blocks for rows of at most
// kStreamShortRowChunks chunks, else in 5 x 40 KB; rows beyond one step of the grid in 48 KB chunks take
// the split path there. Kernels alone, % of the same-run copy (perf/results/*/cuda_stream_unrolled_ab.json,
// docs/chunk_stream.md): H100, 5 x 40 KB 97.0-98.5 % for 1-2 MB rows; H200, 4 x 48 KB whole rows per step
// 89.7-92.4 % for 0.5-3 MB rows (clusters 82.0-84.0 %), 5 x 40 KB 78.1-85.9 %.
constexpr std::int64_t kStreamShortChunkBytes  = 48 * 1024;
constexpr std::int64_t kStreamShortRowChunks   = 32;
constexpr std::int64_t kStreamAlignedMinShare  = 95;
constexpr std::int64_t kStreamAlignedMaxChunks = 64;  // a row of 128 chunks per step at lead 2: 26 % (H100, H200)
constexpr std::int64_t kStreamLongChunkBytes   = 40 * 1024;
// The chunk stream in 5 x 40 KB moves about 28 GB/s per SM at most (H200, kernels alone: 85.9 % of a 4.28 TB/s copy),
// its instructions per chunk step bounding it. Where the device's peak DRAM bandwidth per SM is beyond
// kStreamMaxPeakBytesPerSm (H200: 37 GB/s; H100: 25 GB/s), rows that fit take 4 x 48 KB whole rows per step.
constexpr double kStreamMaxPeakBytesPerSm = 30e9;

std::string describe(const Plan& plan);

}  // namespace impl
}  // namespace cuda_specialized
}  // namespace softfuse

#endif
