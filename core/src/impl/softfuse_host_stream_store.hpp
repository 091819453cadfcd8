#ifndef SOFTFUSE_IMPL_HOST_STREAM_STORE_HPP
#define SOFTFUSE_IMPL_HOST_STREAM_STORE_HPP

// The stores of the host row pass. A plain store to a line that is not in the cache first reads that line
// (write-allocate), so a pass that reads x and writes y moves 3 bytes per byte of y where a copy (memcpy's
// streaming stores) moves 2. Streaming (non-temporal) stores write whole lines without reading them; they
// pay where x and y go beyond the caches (host_last_level_cache_bytes), and would cost a later reader of y
// its cache hits where they do not. x86-64 (SSE2, AVX, AVX-512 by what the compiler targets); plain stores elsewhere
// and in device code. They are weakly ordered: host_stream_fence() follows a thread's last one.

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>

#include <unistd.h>

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && !defined(__SYCL_DEVICE_ONLY__) && \
    (defined(__x86_64__) || defined(_M_X64))
#include <immintrin.h>
#define SOFTFUSE_IMPL_STREAM_STORES 1
#endif

namespace softfuse {
namespace Impl {

/// The last-level cache assumed where the system does not report it.
constexpr std::size_t kHostLastLevelCacheBytes = std::size_t(32) << 20;

/// The host's last-level cache, as the C library reports it.
inline std::size_t host_last_level_cache_bytes() {
  static const std::size_t bytes = [] {
    long llc = -1;
#if defined(_SC_LEVEL3_CACHE_SIZE)
    llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    return llc > 0 ? static_cast<std::size_t>(llc) : kHostLastLevelCacheBytes;
  }();
  return bytes;
}

#if defined(SOFTFUSE_IMPL_STREAM_STORES)
#if defined(__AVX512F__)
constexpr std::size_t kStreamBytes = 64;
inline void stream_scaled(float* y, const float* v, float s) {
  _mm512_stream_ps(y, _mm512_mul_ps(_mm512_loadu_ps(v), _mm512_set1_ps(s)));
}
inline void stream_scaled(double* y, const double* v, double s) {
  _mm512_stream_pd(y, _mm512_mul_pd(_mm512_loadu_pd(v), _mm512_set1_pd(s)));
}
#elif defined(__AVX__)
constexpr std::size_t kStreamBytes = 32;
inline void stream_scaled(float* y, const float* v, float s) {
  _mm256_stream_ps(y, _mm256_mul_ps(_mm256_loadu_ps(v), _mm256_set1_ps(s)));
}
inline void stream_scaled(double* y, const double* v, double s) {
  _mm256_stream_pd(y, _mm256_mul_pd(_mm256_loadu_pd(v), _mm256_set1_pd(s)));
}
#else
constexpr std::size_t kStreamBytes = 16;
inline void stream_scaled(float* y, const float* v, float s) {
  _mm_stream_ps(y, _mm_mul_ps(_mm_loadu_ps(v), _mm_set1_ps(s)));
}
inline void stream_scaled(double* y, const double* v, double s) {
  _mm_stream_pd(y, _mm_mul_pd(_mm_loadu_pd(v), _mm_set1_pd(s)));
}
#endif
#endif

/// y[j] = v[j] * s for j < n (the same products as plain multiplies), through streaming stores where `stream`
/// and supported: plain stores up to y's first vector-aligned element and after its last full vector.
template <class T>
KOKKOS_INLINE_FUNCTION void host_scaled_store(T* y, const T* v, std::int64_t n, T s, bool stream) {
  std::int64_t j = 0;
#if defined(SOFTFUSE_IMPL_STREAM_STORES)
  if (stream) {
    constexpr std::int64_t W = static_cast<std::int64_t>(kStreamBytes / sizeof(T));
    for (; j < n && reinterpret_cast<std::uintptr_t>(y + j) % kStreamBytes != 0; ++j) y[j] = v[j] * s;
    for (; j + W <= n; j += W) stream_scaled(y + j, v + j, s);
  }
#else
  (void)stream;
#endif
  for (; j < n; ++j) y[j] = v[j] * s;
}

/// Orders a thread's streaming stores before its later stores (and the barrier that publishes them).
KOKKOS_INLINE_FUNCTION void host_stream_fence() {
#if defined(SOFTFUSE_IMPL_STREAM_STORES)
  _mm_sfence();
#endif
}

}  // namespace Impl
}  // namespace softfuse

#endif
