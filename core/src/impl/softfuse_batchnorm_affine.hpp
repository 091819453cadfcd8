#ifndef SOFTFUSE_IMPL_BATCHNORM_AFFINE_HPP
#define SOFTFUSE_IMPL_BATCHNORM_AFFINE_HPP

// BatchNorm followed by the scale s, folded per feature j into u = (z + shift_j) * mul_j + add_j, where z is
// the logit without its bias. Stored as affine(j, {0, 1, 2}) = {shift, mul, add} for the row pass.
//  - inference: shift = bias - running_mean, mul = s gamma / sqrt(running_var + eps), add = s beta;
//  - training: shift = -mean_j over the batch, mul = s gamma / sqrt(var_j + eps) with the biased batch
//    variance, add = s beta. The bias cancels, so the statistics are taken on the bias-free logits, and
//    two-pass (mean, then the sum of squared deviations from it, both accumulated in double): no
//    cancellation however large the mean is against the spread. The running statistics are updated on the
//    device: running = (1 - momentum) running + momentum batch_stat (mean + bias; unbiased variance).

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>

#include "softfuse_math.hpp"
#include "softfuse_team_config.hpp"

namespace softfuse {
namespace Impl {

template <class AffineView, class PView, class SView>
struct BatchNormAffineParams {
  AffineView affine;  // [out][3], written
  PView gamma, beta;  // [out]
  SView scale;        // [1] or [out]
  double eps;

  KOKKOS_INLINE_FUNCTION void store(const std::int64_t j, const double shift, const double var) const {
    using T        = typename AffineView::non_const_value_type;
    const double s = scale.extent(0) == 1 ? static_cast<double>(scale(0)) : static_cast<double>(scale(j));
    affine(j, 0)   = static_cast<T>(shift);
    affine(j, 1)   = static_cast<T>(s * gamma(j) / Impl::sqrt(var + eps));
    affine(j, 2)   = static_cast<T>(s * beta(j));
  }
};

template <class Params, class BView, class RView>
struct BatchNormInferenceFunctor {
  Params params;
  BView bias;
  RView running_mean, running_var;

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t j) const {
    params.store(j, static_cast<double>(bias(j)) - static_cast<double>(running_mean(j)),
                 static_cast<double>(running_var(j)));
  }
};

// Training mode's per-feature step once the batch statistics of feature j are known (mean and the sum m2 of
// squared deviations over `count` rows): the affine map, and the running statistics.
template <class Params, class BView, class RView>
struct BatchNormTrainingUpdate {
  Params params;
  BView bias;
  RView running_mean, running_var;
  double momentum;

  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t j, const double m, const double m2,
                                         const double count) const {
    const double var = m2 / count;
    params.store(j, -m, var);
    running_mean(j) =
        static_cast<typename RView::non_const_value_type>((1 - momentum) * running_mean(j) + momentum * (m + bias(j)));
    running_var(j) = static_cast<typename RView::non_const_value_type>((1 - momentum) * running_var(j) +
                                                                       momentum * var * count / (count - 1));
  }
};

// One team per tile of `columns` consecutive features; vector lanes take the columns, team threads
// interleaved groups of rows, and the groups' partial sums meet in team scratch. Each feature's two-pass
// mean and sum of squared deviations go to finish(j, mean, m2, rows).
template <class ExecSpace, class ZView, class Finish>
struct BatchNormTrainingFunctor {
  using member_type   = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  using scratch_space = typename ExecSpace::scratch_memory_space;
  using partial_type =
      Kokkos::View<double**, Kokkos::LayoutRight, scratch_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using mean_type = Kokkos::View<double*, scratch_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  ZView z;  // [batch, out] bias-free logits
  Finish finish;
  int columns;

  static std::size_t scratch_bytes(int team_size, int columns) {
    return partial_type::shmem_size(team_size, columns) + mean_type::shmem_size(columns);
  }

  // partial(g, c) = sum over the rows i of group g of f(c, z(i, c0 + c)).
  template <class F>
  KOKKOS_INLINE_FUNCTION void column_sums(const member_type& team, const partial_type& partial, const std::int64_t c0,
                                          const int nc, const F& f) const {
    const std::int64_t rows = z.extent(0), groups = team.team_size();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, team.team_size()), [&](const int g) {
      if constexpr (is_host_space<ExecSpace>()) {
        // Rows outer: each row's tile is contiguous, and the inner loop over columns vectorizes.
        Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, nc), [&](const int c) { partial(g, c) = 0; });
        for (std::int64_t i = g; i < rows; i += groups)
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, nc),
                               [&](const int c) { partial(g, c) += f(c, static_cast<double>(z(i, c0 + c))); });
      } else {
        // A lane per column, its sum in a register: a warp's loads coalesce, and they are independent,
        // so many are in flight.
        Kokkos::parallel_for(Kokkos::ThreadVectorRange(team, nc), [&](const int c) {
          double s = 0;
          for (std::int64_t i = g; i < rows; i += groups) s += f(c, static_cast<double>(z(i, c0 + c)));
          partial(g, c) = s;
        });
      }
    });
    team.team_barrier();
  }

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const std::int64_t rows = z.extent(0), out = z.extent(1);
    const std::int64_t c0 = static_cast<std::int64_t>(team.league_rank()) * columns;
    const int nc          = static_cast<int>(out - c0 < columns ? out - c0 : columns);
    const int groups      = team.team_size();
    const partial_type partial(team.team_scratch(0), groups, columns);
    const mean_type mean(team.team_scratch(0), columns);

    column_sums(team, partial, c0, nc, [](int, double v) { return v; });
    Kokkos::parallel_for(Kokkos::TeamVectorRange(team, nc), [&](const int c) {
      double s = 0;
      for (int g = 0; g < groups; ++g) s += partial(g, c);
      mean(c) = s / rows;
    });
    team.team_barrier();

    column_sums(team, partial, c0, nc, [&](const int c, const double v) { return (v - mean(c)) * (v - mean(c)); });
    Kokkos::parallel_for(Kokkos::TeamVectorRange(team, nc), [&](const int c) {
      double s = 0;
      for (int g = 0; g < groups; ++g) s += partial(g, c);
      finish(c0 + c, mean(c), s, static_cast<double>(rows));
    });
  }
};

template <class ExecSpace, class Params, class BView, class RView>
void batchnorm_affine_inference(const ExecSpace& space, const Params& params, const BView& bias,
                                const RView& running_mean, const RView& running_var) {
  Kokkos::parallel_for("softfuse::linear_batchnorm_softmax[inference parameters]",
                       Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(space, 0, bias.extent(0)),
                       BatchNormInferenceFunctor<Params, BView, RView>{params, bias, running_mean, running_var});
}

/// finish(j, mean, m2, rows) for every feature j of z [rows > 0, out], asynchronously on `space`.
template <class ExecSpace, class ZView, class Finish>
void batchnorm_column_moments(const ExecSpace& space, const ZView& z, const Finish& finish) {
  using functor_type = BatchNormTrainingFunctor<ExecSpace, ZView, Finish>;
  // GPUs: a warp across 32 features, up to 32 row groups (full occupancy at 1024 rows x 8192 features on an
  // H100). CPUs: one thread streams all rows of 64 features.
  constexpr bool host = is_host_space<ExecSpace>();
  const int columns = host ? 64 : 32, lanes = host ? 1 : 32;
  const std::int64_t out = z.extent(1);
  const int league       = static_cast<int>((out + columns - 1) / columns);
  const functor_type functor{z, finish, columns};
  int groups = 1;
  if (!host) {
    Kokkos::TeamPolicy<ExecSpace> probe(space, league, 1, lanes);
    probe.set_scratch_size(0, Kokkos::PerTeam(functor_type::scratch_bytes(32, columns)));
    groups = std::min(32, probe.team_size_max(functor, Kokkos::ParallelForTag()));
  }
  Kokkos::TeamPolicy<ExecSpace> policy(space, league, groups, lanes);
  policy.set_scratch_size(0, Kokkos::PerTeam(functor_type::scratch_bytes(groups, columns)));
  Kokkos::parallel_for("softfuse::linear_batchnorm_softmax[batch statistics]", policy, functor);
}

template <class ExecSpace, class ZView, class Params, class BView, class RView>
void batchnorm_affine_training(const ExecSpace& space, const ZView& z, const Params& params, const BView& bias,
                               const RView& running_mean, const RView& running_var, double momentum) {
  batchnorm_column_moments(
      space, z, BatchNormTrainingUpdate<Params, BView, RView>{params, bias, running_mean, running_var, momentum});
}

}  // namespace Impl
}  // namespace softfuse

#endif
