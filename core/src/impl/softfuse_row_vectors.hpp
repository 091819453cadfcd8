#ifndef SOFTFUSE_IMPL_ROW_VECTORS_HPP
#define SOFTFUSE_IMPL_ROW_VECTORS_HPP

// Runs of W consecutive row elements moved as one aligned access of W * sizeof(T) bytes (16: 4 floats or 2
// doubles), which GPU compilers turn into one wide load or store instruction: a quarter of the load and store
// instructions and of their addresses for float rows. Plain C++ (an aligned struct), so every Kokkos backend
// compiles it.

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace softfuse {
namespace Impl {

/// The bytes of one run.
constexpr int kRowVectorBytes = 16;

template <class T, int W>
struct alignas(sizeof(T) * W) RowVector {
  T v[W];
};

/// The run of W elements at p (aligned where W > 1); W = 1: one element, converted to T.
template <int W, class T, class U>
KOKKOS_FORCEINLINE_FUNCTION RowVector<T, W> load_run(const U* p) {
  if constexpr (W > 1) {
    return *reinterpret_cast<const RowVector<T, W>*>(p);
  } else {
    return RowVector<T, 1>{{static_cast<T>(*p)}};
  }
}

template <int W, class T>
KOKKOS_FORCEINLINE_FUNCTION void store_run(T* p, const RowVector<T, W>& r) {
  if constexpr (W > 1) {
    *reinterpret_cast<RowVector<T, W>*>(p) = r;
  } else {
    *p = r.v[0];
  }
}

/// Whether p starts an aligned run.
template <class T>
KOKKOS_INLINE_FUNCTION bool starts_row_vector(const T* p) {
  return reinterpret_cast<std::uintptr_t>(p) % kRowVectorBytes == 0;
}

}  // namespace Impl
}  // namespace softfuse

#endif
