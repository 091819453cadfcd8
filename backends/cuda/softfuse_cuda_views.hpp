#ifndef SOFTFUSE_BACKENDS_CUDA_VIEWS_HPP
#define SOFTFUSE_BACKENDS_CUDA_VIEWS_HPP

// What the CUDA specializations ask of a View: rows (or a vector) contiguous in device memory.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <type_traits>

namespace softfuse {
namespace Impl {

// Distance between rows in elements; a single row has no meaningful stride(0).
template <class View>
std::int64_t row_pitch(const View& v) {
  return v.extent(0) <= 1 ? static_cast<std::int64_t>(v.extent(1)) : static_cast<std::int64_t>(v.stride(0));
}

template <class View>
bool rows_contiguous(const View& v) {
  return (v.extent(1) <= 1 || v.stride(1) == 1) && row_pitch(v) >= static_cast<std::int64_t>(v.extent(1));
}

template <class View>
bool vector_contiguous(const View& v) {
  return v.extent(0) <= 1 || v.stride(0) == 1;
}

template <class View, class T>
constexpr bool is_cuda_view_of() {
  return std::is_same<typename View::memory_space, Kokkos::CudaSpace>::value &&
         std::is_same<typename View::non_const_value_type, T>::value;
}

}  // namespace Impl
}  // namespace softfuse

#endif
