#ifndef SOFTFUSE_DISTRIBUTED_HPP
#define SOFTFUSE_DISTRIBUTED_HPP

/// \file
/// softfuse::distributed — softmax and the fused layers on data spread over ranks, with MPI (every backend;
/// -DSOFTFUSE_ENABLE_MPI=ON) or NCCL (Kokkos::Cuda; -DSOFTFUSE_ENABLE_NCCL=ON). Link softfuse::distributed.
///
///   softfuse::distributed::MpiCommunicator comm(MPI_COMM_WORLD);
///   softfuse::distributed::softmax(space, comm, x_shard, y_shard);   // x_shard: [rows, this rank's columns]
///
/// Each operation runs the single-process kernels' pieces locally, reduces a per-row or per-feature summary
/// across ranks once, and finishes locally; results are the same bits on every rank. Every rank must make the
/// same calls in the same order (they are collectives). Wrong arguments on any rank throw
/// std::invalid_argument on every rank (extents that must agree are compared in one small all-reduce).
/// Each returns the implementation that ran locally: Implementation::portable, except inference-mode BatchNorm
/// (the single-process operation on the local rows, which needs no communication).
/// With MPI the host waits for the reduction (device data staged through the host unless MPI is CUDA-aware);
/// with NCCL everything is ordered on space.cuda_stream(), after one host synchronization for the extent check.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>
#include <type_traits>

#include "softfuse_linear_batchnorm_softmax.hpp"
#include "softfuse_linear_gelu_softmax.hpp"
#include "softfuse_softmax.hpp"
#include "impl/softfuse_batchnorm_checks.hpp"
#include "impl/softfuse_distributed_agreement.hpp"
#include "impl/softfuse_distributed_moments.hpp"
#include "impl/softfuse_distributed_row_pass.hpp"
#ifdef SOFTFUSE_HAVE_MPI
#include "impl/softfuse_distributed_mpi_reduce.hpp"
#endif
#ifdef SOFTFUSE_HAVE_NCCL
#include "impl/softfuse_distributed_nccl_reduce.hpp"
#endif

#define SOFTFUSE_IMPL_CHECK_COMMUNICATOR(FUNCTION, SPACE, COMM)                                                      \
  static_assert(softfuse::Impl::IsCommunicator<COMM>::value,                                                         \
                FUNCTION ": the communicator must be a softfuse::distributed::MpiCommunicator or NcclCommunicator"); \
  static_assert(softfuse::Impl::CommunicatorRunsOn<COMM, SPACE>::value,                                              \
                FUNCTION ": NcclCommunicator needs Kokkos::Cuda as the execution space")

namespace softfuse {
namespace Impl {

template <class Comm>
struct IsCommunicator : std::false_type {};
template <class Comm, class ExecSpace>
struct CommunicatorRunsOn : std::true_type {};
#ifdef SOFTFUSE_HAVE_MPI
template <>
struct IsCommunicator<distributed::MpiCommunicator> : std::true_type {};
#endif
#ifdef SOFTFUSE_HAVE_NCCL
template <>
struct IsCommunicator<distributed::NcclCommunicator> : std::true_type {};
template <class ExecSpace>
struct CommunicatorRunsOn<distributed::NcclCommunicator, ExecSpace>
    : std::integral_constant<bool, NcclStream<ExecSpace>::exists> {};
#endif

template <class ExecSpace, class View>
using row_stats_view_t = Kokkos::View<RowStats<typename View::non_const_value_type>*,
                                      Kokkos::Device<ExecSpace, typename View::memory_space>>;

// Local row statistics of op over x (logits or input), one reduction across ranks, then y from them.
template <class ExecSpace, class Comm, class XView, class YView, class Op>
void distributed_row_softmax(const ExecSpace& space, const Comm& comm, const XView& x, const YView& y, const Op& op,
                             const char* function, const std::string& error, const AgreedValues& values,
                             const char* label) {
  Agreement<Comm> agreement(space, comm, values);
  const row_stats_view_t<ExecSpace, YView> stats(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "softfuse::row_stats"), error.empty() ? y.extent(0) : 0);
  if (error.empty()) local_row_stats(space, x, stats, op, label);
  require_agreement(function, error, values, agreement.wait());
  allreduce_row_stats(space, comm, stats);
  write_rows(space, x, y, stats, op, label);
}

}  // namespace Impl

namespace distributed {

/// Softmax over rows whose columns are spread over the ranks: x and y are this rank's [rows, local_cols]
/// (rows the same on every rank, local_cols any, 0 included); y(i, j) = exp(x(i, j) - M_i) / S_i with M_i and
/// S_i the maximum and exp-sum of the whole row i over all ranks. The reference framework's semantics across
/// shards: a NaN or +inf anywhere in a row, or a row of -inf everywhere, makes the whole row NaN on every rank.
/// x and y: rank-2 Views of float or double, any layout; y may be x. Reduction: one all-reduce of a (max, sum)
/// pair per row (MPI: one user-defined reduction; NCCL: MAX, then SUM of the rescaled sums).
template <class ExecSpace, class Comm, class XView, class YView>
Implementation softmax(const ExecSpace& space, const Comm& comm, const XView& x, const YView& y) {
  constexpr const char* function = "softfuse::distributed::softmax";
  SOFTFUSE_IMPL_CHECK_SPACE("softfuse::distributed::softmax", ExecSpace);
  SOFTFUSE_IMPL_CHECK_COMMUNICATOR("softfuse::distributed::softmax", ExecSpace, Comm);
  SOFTFUSE_IMPL_CHECK_VIEW("softfuse::distributed::softmax", ExecSpace, XView, "x", 2);
  SOFTFUSE_IMPL_CHECK_OUTPUT_VIEW("softfuse::distributed::softmax", ExecSpace, YView, "y", 2, XView);
  const std::string error = Impl::local_error([&] {
    Impl::require_extents(x.extent(0) == y.extent(0) && x.extent(1) == y.extent(1), function,
                          "x and y must have the same extents", "x", x, "y", y);
  });
  const Impl::AgreedValues values{{error.empty() ? 1 : 0, static_cast<std::int64_t>(x.extent(0)),
                                   static_cast<std::int64_t>(sizeof(typename YView::non_const_value_type))},
                                  {"", "number of rows (x.extent(0))", "value type"},
                                  3,
                                  0};
  Impl::distributed_row_softmax(space, comm, Impl::exec_view_t<ExecSpace, XView>(x),
                                Impl::exec_view_t<ExecSpace, YView, false>(y), Impl::IdentityOp(), function, error,
                                values, "softfuse::distributed::softmax");
  return Implementation::portable;
}

/// Linear -> GELU -> softmax with the `out` features spread over the ranks: x [batch, in] the same on every rank,
/// weight [local_out, in] and bias [local_out] this rank's rows of the layer's, y [batch, local_out] this rank's
/// columns of the result (local_out any, 0 included). The local GEMM (KokkosBlas::gemm), then bias and GELU and
/// the row statistics in one pass, one all-reduce of a (max, sum) pair per row as in softmax, and the write.
/// Views as for softfuse::linear_gelu_softmax (the portable implementation runs; the GEMM in the Views' type).
template <class ExecSpace, class Comm, class XView, class WView, class BView, class YView>
Implementation linear_gelu_softmax(const ExecSpace& space, const Comm& comm, const XView& x, const WView& weight,
                                   const BView& bias, const YView& y, Gelu gelu = Gelu::exact) {
  constexpr const char* function = "softfuse::distributed::linear_gelu_softmax";
  SOFTFUSE_IMPL_CHECK_COMMUNICATOR("softfuse::distributed::linear_gelu_softmax", ExecSpace, Comm);
  SOFTFUSE_IMPL_CHECK_LINEAR_VIEWS("softfuse::distributed::linear_gelu_softmax", ExecSpace, XView, WView, BView, YView);
  const std::string error = Impl::local_error([&] { Impl::require_linear_extents(function, x, weight, bias, y); });
  const Impl::AgreedValues values{
      {error.empty() ? 1 : 0, static_cast<std::int64_t>(x.extent(0)), static_cast<std::int64_t>(x.extent(1)),
       static_cast<std::int64_t>(sizeof(typename YView::non_const_value_type))},
      {"", "batch (x.extent(0))", "in (x.extent(1))", "value type"},
      4,
      0};
  const Impl::exec_view_t<ExecSpace, XView> xn        = x;
  const Impl::exec_view_t<ExecSpace, WView> wn        = weight;
  const Impl::exec_view_t<ExecSpace, BView> bn        = bias;
  const Impl::exec_view_t<ExecSpace, YView, false> yn = y;
  if (error.empty()) Impl::linear_gemm(space, xn, wn, yn);
  const char* label = "softfuse::distributed::linear_gelu_softmax";
  if (gelu == Gelu::exact)
    Impl::distributed_row_softmax(space, comm, yn, yn, Impl::BiasGeluOp<decltype(bn), true>{bn}, function, error,
                                  values, label);
  else
    Impl::distributed_row_softmax(space, comm, yn, yn, Impl::BiasGeluOp<decltype(bn), false>{bn}, function, error,
                                  values, label);
  return Implementation::portable;
}

/// Linear -> BatchNorm1d -> scale -> softmax with the batch spread over the ranks: x [local_batch, in] and
/// y [local_batch, out] this rank's rows (local_batch any, 0 included; more than one row over all ranks in
/// training mode), weight, bias, bn and scale the same on every rank (as for softfuse::linear_batchnorm_softmax).
/// Training mode: each rank's per-feature (count, mean, sum of squared deviations) of its logits, in double,
/// merged across ranks in one all-reduce (Chan's pairwise formula with MPI; two SUMs around the global mean
/// with NCCL), so every rank normalizes with the whole batch's mean and biased variance and updates
/// bn.running_mean / bn.running_var identically, with the whole batch's unbiased variance. The portable local
/// passes run (GEMM in the Views' type). Inference mode needs no communication: it is
/// softfuse::linear_batchnorm_softmax on the local rows.
template <class ExecSpace, class Comm, class XView, class WView, class BView, class VectorView, class SView,
          class YView>
Implementation linear_batchnorm_softmax(const ExecSpace& space, const Comm& comm, const XView& x, const WView& weight,
                                        const BView& bias, const BatchNorm<VectorView>& bn, const SView& scale,
                                        const YView& y) {
  constexpr const char* function = "softfuse::distributed::linear_batchnorm_softmax";
  SOFTFUSE_IMPL_CHECK_COMMUNICATOR("softfuse::distributed::linear_batchnorm_softmax", ExecSpace, Comm);
  SOFTFUSE_IMPL_CHECK_LINEAR_VIEWS("softfuse::distributed::linear_batchnorm_softmax", ExecSpace, XView, WView, BView,
                                   YView);
  SOFTFUSE_IMPL_CHECK_OUTPUT_VIEW("softfuse::distributed::linear_batchnorm_softmax", ExecSpace, VectorView,
                                  "bn's Views", 1, XView);
  SOFTFUSE_IMPL_CHECK_INPUT_VIEW("softfuse::distributed::linear_batchnorm_softmax", ExecSpace, SView, "scale", 1,
                                 XView);
  if (bn.mode == BatchNormMode::inference)
    return softfuse::linear_batchnorm_softmax(space, x, weight, bias, bn, scale, y);
  using T                 = typename YView::non_const_value_type;
  const std::string error = Impl::local_error([&] {
    Impl::require_linear_extents(function, x, weight, bias, y);
    Impl::require_batchnorm_extents(function, weight, bn, scale);
  });
  const Impl::AgreedValues values{{error.empty() ? 1 : 0, static_cast<std::int64_t>(x.extent(1)),
                                   static_cast<std::int64_t>(weight.extent(0)), static_cast<std::int64_t>(sizeof(T))},
                                  {"", "in (x.extent(1))", "out (weight.extent(0))", "value type"},
                                  4,
                                  static_cast<std::int64_t>(x.extent(0))};
  Impl::Agreement<Comm> agreement(space, comm, values);

  using device_type = Kokkos::Device<ExecSpace, typename YView::memory_space>;
  using affine_type = Kokkos::View<T* [3], Kokkos::LayoutRight, device_type, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using RView       = Impl::exec_view_t<ExecSpace, VectorView, false>;
  using PView       = Impl::exec_view_t<ExecSpace, VectorView>;
  using SN          = Impl::exec_view_t<ExecSpace, SView>;
  const Impl::exec_view_t<ExecSpace, BView> bias_n    = bias;
  const Impl::exec_view_t<ExecSpace, YView, false> yn = y;
  const std::int64_t out                              = error.empty() ? static_cast<std::int64_t>(weight.extent(0)) : 0;
  const Kokkos::View<Impl::FeatureMoments*, device_type> moments(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "softfuse::feature_moments"), out);
  if (error.empty()) {
    Impl::linear_gemm(space, Impl::exec_view_t<ExecSpace, XView>(x), Impl::exec_view_t<ExecSpace, WView>(weight), yn);
    Impl::local_feature_moments(space, yn, moments);
  }
  const Impl::AgreementResult agreed = agreement.wait();
  Impl::require_agreement(function, error, values, agreed);
  if (agreed.total < 2)
    throw std::invalid_argument(std::string(function) +
                                ": training mode needs more than one row over all ranks to compute batch statistics");
  Impl::allreduce_feature_moments(space, comm, moments);

  Kokkos::View<T*, device_type> owned;
  T* workspace = bn.workspace.extent(0) != 0 ? bn.workspace.data() : nullptr;
  if (!workspace) {
    owned     = decltype(owned)(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, "softfuse::batchnorm_workspace"),
                            3 * out);
    workspace = owned.data();
  }
  const affine_type affine(workspace, out);
  using Params = Impl::BatchNormAffineParams<affine_type, PView, SN>;
  const Params params{affine, PView(bn.gamma), PView(bn.beta), SN(scale), bn.eps};
  Impl::finish_feature_moments(space, moments,
                               Impl::BatchNormTrainingUpdate<Params, decltype(bias_n), RView>{
                                   params, bias_n, RView(bn.running_mean), RView(bn.running_var), bn.momentum});
  if (yn.extent(0) != 0 && out != 0)
    Impl::row_softmax(space, yn, yn, Impl::FeatureAffineOp<affine_type>{affine}, true,
                      "softfuse::distributed::linear_batchnorm_softmax");
  return Implementation::portable;
}

}  // namespace distributed
}  // namespace softfuse

#endif
