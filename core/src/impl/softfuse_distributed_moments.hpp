#ifndef SOFTFUSE_IMPL_DISTRIBUTED_MOMENTS_HPP
#define SOFTFUSE_IMPL_DISTRIBUTED_MOMENTS_HPP

// Per-feature batch statistics of a batch sharded over ranks: each rank's (count, mean, m2) — m2 the sum of
// squared deviations from the rank's own mean, both two-pass in double (BatchNormTrainingFunctor) — merged
// by Chan, Golub and LeVeque's pairwise formula, so no raw sum of squares ever cancels:
//   n = na + nb, d = mb - ma, mean = ma + d nb / n, m2 = m2a + m2b + d^2 na nb / n.
// merge() puts its operands in a canonical order first, so merge(a, b) and merge(b, a) are the same bits
// (an all-reduce may combine a pair in either order on different ranks).

#include <Kokkos_Core.hpp>

#include <cstdint>

#include "softfuse_batchnorm_affine.hpp"

namespace softfuse {
namespace Impl {

struct FeatureMoments {
  double count, mean, m2;

  KOKKOS_INLINE_FUNCTION static FeatureMoments merge(FeatureMoments a, FeatureMoments b) {
    if (b.count > a.count || (b.count == a.count && (b.mean > a.mean || (b.mean == a.mean && b.m2 > a.m2)))) {
      const FeatureMoments t = a;
      a                      = b;
      b                      = t;
    }
    if (b.count == 0) return a;
    const double n = a.count + b.count, d = b.mean - a.mean;
    return {n, a.mean + d * (b.count / n), a.m2 + b.m2 + d * d * (a.count * b.count / n)};
  }
};

template <class MomentsView>
struct StoreMoments {
  MomentsView moments;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t j, const double mean, const double m2,
                                         const double count) const {
    moments(j) = FeatureMoments{count, mean, m2};
  }
};

template <class MomentsView>
struct EmptyMoments {
  MomentsView moments;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t j) const { moments(j) = FeatureMoments{0, 0, 0}; }
};

/// moments(j) = this rank's (rows, mean, m2) of feature j of z [rows, out], asynchronously on `space`.
template <class ExecSpace, class ZView, class MomentsView>
void local_feature_moments(const ExecSpace& space, const ZView& z, const MomentsView& moments) {
  if (z.extent(1) == 0) return;
  if (z.extent(0) == 0)
    Kokkos::parallel_for("softfuse::distributed::linear_batchnorm_softmax[empty shard]",
                         Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(space, 0, z.extent(1)),
                         EmptyMoments<MomentsView>{moments});
  else
    batchnorm_column_moments(space, z, StoreMoments<MomentsView>{moments});
}

template <class MomentsView, class Finish>
struct FinishFromMoments {
  MomentsView moments;
  Finish finish;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t j) const {
    const FeatureMoments m = moments(j);
    finish(j, m.mean, m.m2, m.count);
  }
};

/// finish(j, mean, m2, count) from the merged moments of every feature, asynchronously on `space`.
template <class ExecSpace, class MomentsView, class Finish>
void finish_feature_moments(const ExecSpace& space, const MomentsView& moments, const Finish& finish) {
  Kokkos::parallel_for("softfuse::distributed::linear_batchnorm_softmax[parameters]",
                       Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(space, 0, moments.extent(0)),
                       FinishFromMoments<MomentsView, Finish>{moments, finish});
}

}  // namespace Impl
}  // namespace softfuse

#endif
