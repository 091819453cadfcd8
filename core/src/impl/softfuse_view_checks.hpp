#ifndef SOFTFUSE_IMPL_VIEW_CHECKS_HPP
#define SOFTFUSE_IMPL_VIEW_CHECKS_HPP

// Argument checks shared by every public entry point. Compile-time checks are macros so that each
// static_assert message starts with the calling function's name.

#include <Kokkos_Core.hpp>

#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

#define SOFTFUSE_IMPL_CHECK_SPACE(FUNCTION, SPACE)        \
  static_assert(Kokkos::is_execution_space<SPACE>::value, \
                FUNCTION ": the first argument must be a Kokkos execution space")

// VIEW must be a View of rank RANK, of float or double, accessible from SPACE.
#define SOFTFUSE_IMPL_CHECK_VIEW(FUNCTION, SPACE, VIEW, NAME, RANK)                                         \
  static_assert(Kokkos::is_view<VIEW>::value, FUNCTION ": " NAME " must be a Kokkos::View");                \
  static_assert(static_cast<int>(VIEW::rank) == RANK, FUNCTION ": " NAME " must be a rank-" #RANK " View"); \
  static_assert(std::is_same<typename VIEW::non_const_value_type, float>::value ||                          \
                    std::is_same<typename VIEW::non_const_value_type, double>::value,                       \
                FUNCTION ": " NAME " must hold float or double");                                           \
  static_assert(Kokkos::SpaceAccessibility<SPACE, typename VIEW::memory_space>::accessible,                 \
                FUNCTION ": " NAME "'s memory space is not accessible from the execution space")

// An output View: as above, and writable, with the value type of REF.
#define SOFTFUSE_IMPL_CHECK_OUTPUT_VIEW(FUNCTION, SPACE, VIEW, NAME, RANK, REF)                               \
  SOFTFUSE_IMPL_CHECK_VIEW(FUNCTION, SPACE, VIEW, NAME, RANK);                                                \
  static_assert(!std::is_const<typename VIEW::value_type>::value, FUNCTION ": " NAME " must not be const");   \
  static_assert(std::is_same<typename VIEW::non_const_value_type, typename REF::non_const_value_type>::value, \
                FUNCTION ": " NAME " must have the same value type as the inputs")

namespace softfuse {
namespace Impl {

template <class View>
std::string extents_string(const View& v) {
  std::ostringstream s;
  for (int r = 0; r < static_cast<int>(View::rank); ++r) s << (r ? " x " : "") << v.extent(r);
  if (static_cast<int>(View::rank) == 0) s << "scalar";
  return s.str();
}

/// Throws std::invalid_argument "<function>: <message> (a is ..., b is ...)" when `ok` is false.
template <class A, class B>
void require_extents(bool ok, const char* function, const char* message, const char* name_a, const A& a,
                     const char* name_b, const B& b) {
  if (ok) return;
  std::ostringstream s;
  s << function << ": " << message << " (" << name_a << " is " << extents_string(a) << ", " << name_b << " is "
    << extents_string(b) << ")";
  throw std::invalid_argument(s.str());
}

/// The few View types the implementations are instantiated for: unmanaged, LayoutRight kept as is
/// (contiguous rows), every other layout as LayoutStride.
template <class View, bool Const>
struct Normalized {
  using scalar =
      std::conditional_t<Const, const typename View::non_const_value_type, typename View::non_const_value_type>;
  using layout = std::conditional_t<std::is_same<typename View::array_layout, Kokkos::LayoutRight>::value,
                                    Kokkos::LayoutRight, Kokkos::LayoutStride>;
  using type   = Kokkos::View<std::conditional_t<static_cast<int>(View::rank) == 1, scalar*, scalar**>, layout,
                            typename View::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
};

template <class View>
using const_view_t = typename Normalized<View, true>::type;
template <class View>
using view_t = typename Normalized<View, false>::type;

}  // namespace Impl
}  // namespace softfuse

#endif
