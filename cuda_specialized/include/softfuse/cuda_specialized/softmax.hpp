// softfuse: hand-tuned CUDA softmax kernels behind a plain interface (no Kokkos).
//
// Row-wise softmax of a row-major matrix held in device memory:
//   y[r*ldy + c] = exp(x[r*ldx + c] - m_r) / s_r,  m_r = max_c x[r*ldx + c],
//   s_r = sum_c exp(x[r*ldx + c] - m_r)  (accumulated in double for float input).
// A row holding a NaN or a +inf, or made only of -inf, comes out as a row of NaN.
//
// The kernels are compiled for sm_80 and sm_90a. Each element is read from device
// memory once and written once: rows up to one block's shared memory are held by a
// warp, a block or a cluster of two; longer 16-byte-aligned rows (up to about 2.7
// million fp32 columns on an H100) are streamed in chunks through a persistent
// cooperative grid, each chunk held on chip until its row's maximum and sum are
// known (unaligned long rows: thread-block clusters or grid groups of blocks).
// Longer rows (and long rows where none of these can run) take a two-pass split
// path. Rows beyond one block use a small workspace from the library's
// stream-ordered memory pool (partials of each chunk or block, < 0.1 % of x). The
// chunk streams keep theirs per device across calls (tagged per call, so not cleared
// per call; calls that use it are ordered, also across streams); under graph capture
// they take a zeroed one per call.
#ifndef SOFTFUSE_CUDA_SPECIALIZED_SOFTMAX_HPP
#define SOFTFUSE_CUDA_SPECIALIZED_SOFTMAX_HPP

#include <cstdint>
#include <cuda_runtime_api.h>

namespace softfuse {
namespace cuda_specialized {

// True when the specialized kernels can run on `device`: the device exists, its compute
// capability is 8.0 or newer and this library holds machine code that loads on it.
// Never throws; false on a machine without a usable CUDA device.
bool softmax_available(int device);

// y[r*ldy + c] = softmax over c of x[r*ldx + c], for r < rows, c < cols, on the current device.
// rows, cols >= 0; ldx, ldy >= cols (in elements); x == y (in place) is allowed, any other
// overlap is not. Asynchronous on `stream`. Throws std::invalid_argument on bad extents and
// std::runtime_error carrying the CUDA error string (prefixed
// "softfuse::cuda_specialized::softmax: ") if a query or a launch fails.
void softmax(const float* x, std::int64_t ldx, float* y, std::int64_t ldy, std::int64_t rows, std::int64_t cols,
             cudaStream_t stream);
void softmax(const double* x, std::int64_t ldx, double* y, std::int64_t ldy, std::int64_t rows, std::int64_t cols,
             cudaStream_t stream);

}  // namespace cuda_specialized
}  // namespace softfuse

#endif
