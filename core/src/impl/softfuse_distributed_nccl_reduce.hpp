#ifndef SOFTFUSE_IMPL_DISTRIBUTED_NCCL_REDUCE_HPP
#define SOFTFUSE_IMPL_DISTRIBUTED_NCCL_REDUCE_HPP

// The reductions of softfuse::distributed over NCCL, stream-ordered on the execution space's CUDA stream. NCCL
// has no user-defined reductions, so each merge is two built-in all-reduces with a small Kokkos kernel around
// them:
//  - row statistics: MAX over the row maxima, then each rank rescales its sum to the common maximum
//    (exp(m_r - m), exactly 1 where m_r = m, as RowStats::combine does) and SUM over the rescaled sums (double);
//  - feature moments: SUM over (count * mean, count), then each rank's m2 + count (mean - mean_all)^2 and SUM
//    over those: the exact parallel variance formula, deviations taken from the global mean in double.
// NCCL's all-reduces leave the same bits on every rank. A NaN element makes its rank's row sum NaN, which the
// SUM spreads to every rank; a NaN rank maximum is sent as -inf so that MAX does not depend on how NCCL
// orders NaN.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "../softfuse_distributed_nccl.hpp"
#include "softfuse_distributed_agreement.hpp"
#include "softfuse_distributed_moments.hpp"
#include "softfuse_math.hpp"
#include "softfuse_row_exp.hpp"
#include "softfuse_row_stats.hpp"

namespace softfuse {
namespace Impl {

/// The CUDA stream of an execution space instance, where NCCL runs: Kokkos::Cuda only.
template <class ExecSpace>
struct NcclStream {
  static constexpr bool exists = false;
};
#ifdef KOKKOS_ENABLE_CUDA
template <>
struct NcclStream<Kokkos::Cuda> {
  static constexpr bool exists = true;
  static cudaStream_t get(const Kokkos::Cuda& space) { return space.cuda_stream(); }
};
#endif

template <class T>
struct NcclType;
template <>
struct NcclType<float> {
  static constexpr ncclDataType_t value = ncclFloat32;
};
template <>
struct NcclType<double> {
  static constexpr ncclDataType_t value = ncclFloat64;
};
template <>
struct NcclType<std::int64_t> {
  static constexpr ncclDataType_t value = ncclInt64;
};

inline void nccl_check(ncclResult_t status, const char* what) {
  if (status != ncclSuccess)
    throw std::runtime_error(std::string("softfuse::distributed: ") + what + " failed: " + ncclGetErrorString(status));
}

template <class ExecSpace, class T>
void nccl_allreduce(const ExecSpace& space, const distributed::NcclCommunicator& comm, T* data, std::size_t n,
                    ncclRedOp_t op) {
  nccl_check(ncclAllReduce(data, data, n, NcclType<T>::value, op, comm.comm(), NcclStream<ExecSpace>::get(space)),
             "ncclAllReduce");
}

template <>
class Agreement<distributed::NcclCommunicator> {
 public:
  /// Blocks: the verdict is needed on the host (one small all-reduce pair and a stream synchronization).
  template <class ExecSpace>
  Agreement(const ExecSpace& space, const distributed::NcclCommunicator& comm, const AgreedValues& v) : values_(v) {
    std::int64_t buffer[2 * max_agreed_values + 1];
    agreement_buffer(v, buffer);
    const int n = 2 * v.n;
    Kokkos::View<std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> host(buffer, n + 1);
    Kokkos::View<std::int64_t*, typename ExecSpace::memory_space> device(
        Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "softfuse::nccl_agreement"), n + 1);
    Kokkos::deep_copy(space, device, host);
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    nccl_check(ncclAllReduce(device.data(), device.data(), n, ncclInt64, ncclMax, comm.comm(),
                             NcclStream<ExecSpace>::get(space)),
               "ncclAllReduce");
    nccl_check(ncclAllReduce(device.data() + n, device.data() + n, 1, ncclInt64, ncclSum, comm.comm(),
                             NcclStream<ExecSpace>::get(space)),
               "ncclAllReduce");
    nccl_check(ncclGroupEnd(), "ncclGroupEnd");
    Kokkos::deep_copy(space, host, device);
    space.fence();
    result_ = agreement_result(v, buffer);
  }

  AgreementResult wait() const { return result_; }

 private:
  AgreedValues values_;
  AgreementResult result_;
};

template <class StatsView, class MaxView, class SumView>
struct NcclRowStatsSplit {
  StatsView stats;
  MaxView max;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    const auto m = stats(i).max;
    max(i)       = m == m ? m : -Infinity<typename MaxView::non_const_value_type>::value;
  }
};

template <class StatsView, class MaxView, class SumView>
struct NcclRowStatsRescale {
  StatsView stats;
  MaxView max;
  SumView sum;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    const auto s = stats(i);
    sum(i)       = s.max == max(i) ? s.sum : s.sum * static_cast<double>(row_exp(s.max - max(i)));
  }
};

template <class StatsView, class MaxView, class SumView>
struct NcclRowStatsJoin {
  StatsView stats;
  MaxView max;
  SumView sum;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    stats(i).max = max(i);
    stats(i).sum = sum(i);
  }
};

template <class ExecSpace, class StatsView>
void allreduce_row_stats(const ExecSpace& space, const distributed::NcclCommunicator& comm, const StatsView& stats) {
  using T              = decltype(stats(0).max);
  using device_type    = Kokkos::Device<ExecSpace, typename StatsView::memory_space>;
  using range          = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;
  using MaxView        = Kokkos::View<T*, device_type>;
  using SumView        = Kokkos::View<double*, device_type>;
  const std::int64_t n = stats.extent(0);
  if (n == 0) return;
  const MaxView max(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "softfuse::nccl_row_max"), n);
  const SumView sum(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "softfuse::nccl_row_sum"), n);
  Kokkos::parallel_for("softfuse::distributed[row maxima]", range(space, 0, n),
                       NcclRowStatsSplit<StatsView, MaxView, SumView>{stats, max});
  nccl_allreduce(space, comm, max.data(), n, ncclMax);
  Kokkos::parallel_for("softfuse::distributed[row sums]", range(space, 0, n),
                       NcclRowStatsRescale<StatsView, MaxView, SumView>{stats, max, sum});
  nccl_allreduce(space, comm, sum.data(), n, ncclSum);
  Kokkos::parallel_for("softfuse::distributed[row statistics]", range(space, 0, n),
                       NcclRowStatsJoin<StatsView, MaxView, SumView>{stats, max, sum});
}

template <class MomentsView, class SumView>
struct NcclMomentsWeigh {
  MomentsView moments;
  SumView sums;  // [2 * out]: count * mean, then count
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t j) const {
    const FeatureMoments m      = moments(j);
    sums(j)                     = m.count * m.mean;
    sums(moments.extent(0) + j) = m.count;
  }
};

template <class MomentsView, class SumView>
struct NcclMomentsDeviation {
  MomentsView moments;
  SumView sums;
  SumView m2;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t j) const {
    const FeatureMoments m = moments(j);
    const double count = sums(moments.extent(0) + j), mean = count > 0 ? sums(j) / count : 0.0;
    const double d = m.mean - mean;
    m2(j)          = m.count > 0 ? m.m2 + m.count * d * d : 0.0;
  }
};

template <class MomentsView, class SumView>
struct NcclMomentsJoin {
  MomentsView moments;
  SumView sums;
  SumView m2;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t j) const {
    const double count = sums(moments.extent(0) + j);
    moments(j)         = FeatureMoments{count, count > 0 ? sums(j) / count : 0.0, m2(j)};
  }
};

template <class ExecSpace, class MomentsView>
void allreduce_feature_moments(const ExecSpace& space, const distributed::NcclCommunicator& comm,
                               const MomentsView& moments) {
  using SumView          = Kokkos::View<double*, Kokkos::Device<ExecSpace, typename MomentsView::memory_space>>;
  using range            = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;
  const std::int64_t out = moments.extent(0);
  if (out == 0) return;
  const SumView sums(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "softfuse::nccl_moment_sums"), 2 * out);
  const SumView m2(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "softfuse::nccl_moment_m2"), out);
  Kokkos::parallel_for("softfuse::distributed[feature sums]", range(space, 0, out),
                       NcclMomentsWeigh<MomentsView, SumView>{moments, sums});
  nccl_allreduce(space, comm, sums.data(), 2 * out, ncclSum);
  Kokkos::parallel_for("softfuse::distributed[feature deviations]", range(space, 0, out),
                       NcclMomentsDeviation<MomentsView, SumView>{moments, sums, m2});
  nccl_allreduce(space, comm, m2.data(), out, ncclSum);
  Kokkos::parallel_for("softfuse::distributed[feature moments]", range(space, 0, out),
                       NcclMomentsJoin<MomentsView, SumView>{moments, sums, m2});
}

}  // namespace Impl
}  // namespace softfuse

#endif
