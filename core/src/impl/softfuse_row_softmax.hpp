#ifndef SOFTFUSE_IMPL_ROW_SOFTMAX_HPP
#define SOFTFUSE_IMPL_ROW_SOFTMAX_HPP

// The portable row kernel behind softmax and the fused layers: y(i, :) = softmax(op(j, x(i, j))),
// a TeamPolicy with one team per row calling TeamSoftmax. Rows that fit in level-0 team scratch
// may be cached there (read from memory once); whether the cache is used is a template parameter,
// so each variant is its own kernel with its own register budget and team shape.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "../softfuse_team_softmax.hpp"
#include "softfuse_team_config.hpp"

namespace softfuse {
namespace Impl {

template <class ExecSpace, class XView, class YView, class Op, bool Cached>
struct RowSoftmaxFunctor {
  using member_type = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using cache_type = Kokkos::View<typename YView::non_const_value_type*, typename ExecSpace::scratch_memory_space,
                                  Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  XView x;
  YView y;
  Op op;
  std::int64_t first_row;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const std::int64_t i = first_row + team.league_rank();
    const auto x_row = Kokkos::subview(x, i, Kokkos::ALL);
    const auto y_row = Kokkos::subview(y, i, Kokkos::ALL);
    if constexpr (Cached)
      TeamSoftmax::invoke(team, x_row, y_row, cache_type(team.team_scratch(0), y.extent(1)), op);
    else
      TeamSoftmax::invoke(team, x_row, y_row, op);
  }
};

template <bool Cached, class ExecSpace, class XView, class YView, class Op>
void launch_row_softmax(const ExecSpace& space, const XView& x, const YView& y, const Op& op, const char* label) {
  using functor_type = RowSoftmaxFunctor<ExecSpace, XView, YView, Op, Cached>;
  using policy_type = Kokkos::TeamPolicy<ExecSpace>;
  const std::int64_t rows = y.extent(0), cols = y.extent(1);
  // shmem_size includes the scratch allocator's alignment padding.
  const std::size_t cache_bytes = Cached ? functor_type::cache_type::shmem_size(cols) : 0;
  functor_type functor{x, y, op, 0};
  for (std::int64_t first = 0; first < rows; first += INT_MAX) {  // league sizes are int
    const int league = static_cast<int>(std::min<std::int64_t>(rows - first, INT_MAX));
    policy_type probe(space, league, 1);
    if (Cached) probe.set_scratch_size(0, Kokkos::PerTeam(cache_bytes));
    const int team =
        row_team_size(space, league, cols, probe.team_size_max(functor, Kokkos::ParallelForTag()), Cached);
    policy_type policy(space, league, team);
    if (Cached) policy.set_scratch_size(0, Kokkos::PerTeam(cache_bytes));
    functor.first_row = first;
    Kokkos::parallel_for(label, policy, functor);
  }
}

/// y(i, :) = softmax(op(j, x(i, j))) for every row, asynchronously on `space`; x may be y. Rows are
/// cached in team scratch where they fit and `cache` allows it.
template <class ExecSpace, class XView, class YView, class Op>
void row_softmax(const ExecSpace& space, const XView& x, const YView& y, const Op& op, bool cache, const char* label) {
  using probe_functor = RowSoftmaxFunctor<ExecSpace, XView, YView, Op, true>;
  if (y.extent(0) == 0 || y.extent(1) == 0) return;
  const std::size_t cache_bytes = probe_functor::cache_type::shmem_size(y.extent(1));
  if (cache && cache_bytes <= static_cast<std::size_t>(Kokkos::TeamPolicy<ExecSpace>(space, 1, 1).scratch_size_max(0)))
    launch_row_softmax<true>(space, x, y, op, label);
  else
    launch_row_softmax<false>(space, x, y, op, label);
}

/// The portable softmax. On CPUs the second read of a row hits the cache anyway, so rows are
/// cached in team scratch only where that saves a memory pass (GPUs).
template <class ExecSpace, class XView, class YView>
void softmax_portable(const ExecSpace& space, const XView& x, const YView& y) {
  row_softmax(space, x, y, IdentityOp(), row_cache_pays<ExecSpace>(), "softfuse::softmax[portable]");
}

}  // namespace Impl
}  // namespace softfuse

#endif
