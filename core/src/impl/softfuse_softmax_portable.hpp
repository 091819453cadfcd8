#ifndef SOFTFUSE_IMPL_SOFTMAX_PORTABLE_HPP
#define SOFTFUSE_IMPL_SOFTMAX_PORTABLE_HPP

// The portable softmax: a TeamPolicy with one team per row, each calling TeamSoftmax. Rows that
// fit in level-0 team scratch are cached there and read from memory once.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "../softfuse_team_softmax.hpp"
#include "softfuse_team_config.hpp"

namespace softfuse {
namespace Impl {

template <class ExecSpace, class XView, class YView>
struct SoftmaxRowFunctor {
  using member_type = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using value_type = typename YView::non_const_value_type;
  using cache_type = Kokkos::View<value_type*, typename ExecSpace::scratch_memory_space,
                                  Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  XView x;
  YView y;
  std::int64_t first_row;
  bool use_cache;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const std::int64_t i = first_row + team.league_rank();
    const auto x_row = Kokkos::subview(x, i, Kokkos::ALL);
    const auto y_row = Kokkos::subview(y, i, Kokkos::ALL);
    if (use_cache) {
      const cache_type cache(team.team_scratch(0), y.extent(1));
      TeamSoftmax::invoke(team, x_row, y_row, cache);
    } else {
      TeamSoftmax::invoke(team, x_row, y_row);
    }
  }
};

template <class ExecSpace, class XView, class YView>
void softmax_portable(const ExecSpace& space, const XView& x, const YView& y) {
  using functor_type = SoftmaxRowFunctor<ExecSpace, XView, YView>;
  using policy_type = Kokkos::TeamPolicy<ExecSpace>;
  const std::int64_t rows = y.extent(0), cols = y.extent(1);
  if (rows == 0 || cols == 0) return;

  // shmem_size includes the scratch allocator's alignment padding.
  const std::size_t row_bytes = functor_type::cache_type::shmem_size(cols);
  const bool use_cache = row_cache_pays<ExecSpace>() &&
                         row_bytes <= static_cast<std::size_t>(policy_type(space, 1, 1).scratch_size_max(0));
  functor_type functor{x, y, 0, use_cache};

  // League sizes are int: launch at most INT_MAX rows at a time.
  for (std::int64_t first = 0; first < rows; first += INT_MAX) {
    const int league = static_cast<int>(std::min<std::int64_t>(rows - first, INT_MAX));
    policy_type probe(space, league, 1);
    if (use_cache) probe.set_scratch_size(0, Kokkos::PerTeam(row_bytes));
    const int team =
        row_team_size(space, league, cols, probe.team_size_max(functor, Kokkos::ParallelForTag()), use_cache);
    policy_type policy(space, league, team);
    if (use_cache) policy.set_scratch_size(0, Kokkos::PerTeam(row_bytes));
    functor.first_row = first;
    Kokkos::parallel_for("softfuse::softmax[portable]", policy, functor);
  }
}

}  // namespace Impl
}  // namespace softfuse

#endif
