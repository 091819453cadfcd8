#ifndef SOFTFUSE_IMPL_DISTRIBUTED_MPI_REDUCE_HPP
#define SOFTFUSE_IMPL_DISTRIBUTED_MPI_REDUCE_HPP

// The reductions of softfuse::distributed over MPI. Each per-row (max, sum) pair, and each per-feature
// (count, mean, m2) triple, is one element of a user-defined datatype reduced by one MPI_Iallreduce with a
// commutative user-defined MPI_Op (RowStats::combine, FeatureMoments::merge: both give the same bits in either
// operand order, so every rank ends with the same bits whichever order the MPI library pairs them in).
// Device memory is copied to and from the host around the call unless MPI is CUDA-aware.

#include <Kokkos_Core.hpp>

#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../softfuse_distributed_mpi.hpp"
#include "softfuse_distributed_agreement.hpp"
#include "softfuse_distributed_moments.hpp"
#include "softfuse_row_stats.hpp"

namespace softfuse {
namespace Impl {

inline void mpi_check(int status, const char* what) {
  if (status != MPI_SUCCESS) throw std::runtime_error(std::string("softfuse::distributed: ") + what + " failed");
}

template <class S>
struct MpiMerge;
template <class T>
struct MpiMerge<RowStats<T>> {
  static RowStats<T> apply(const RowStats<T>& a, const RowStats<T>& b) { return RowStats<T>::combine(a, b); }
};
template <>
struct MpiMerge<FeatureMoments> {
  static FeatureMoments apply(const FeatureMoments& a, const FeatureMoments& b) { return FeatureMoments::merge(a, b); }
};

template <class S>
void mpi_merge(void* in, void* inout, int* len, MPI_Datatype*) {
  const S* a = static_cast<const S*>(in);
  S* b       = static_cast<S*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = MpiMerge<S>::apply(a[i], b[i]);
}

/// S as an MPI datatype (its bytes) and its merge as a commutative MPI_Op, created once (MPI frees them at
/// MPI_Finalize).
template <class S>
struct MpiElement {
  static MPI_Datatype type() {
    static const MPI_Datatype t = [] {
      MPI_Datatype d;
      mpi_check(MPI_Type_contiguous(static_cast<int>(sizeof(S)), MPI_BYTE, &d), "MPI_Type_contiguous");
      mpi_check(MPI_Type_commit(&d), "MPI_Type_commit");
      return d;
    }();
    return t;
  }
  static MPI_Op op() {
    static const MPI_Op o = [] {
      MPI_Op op;
      mpi_check(MPI_Op_create(&mpi_merge<S>, 1, &op), "MPI_Op_create");
      return op;
    }();
    return o;
  }
};

template <>
class Agreement<distributed::MpiCommunicator> {
 public:
  template <class ExecSpace>
  Agreement(const ExecSpace&, const distributed::MpiCommunicator& comm, const AgreedValues& v) : values_(v) {
    agreement_buffer(v, send_);
    const int n = 2 * v.n;
    mpi_check(MPI_Iallreduce(send_, received_, n, MPI_INT64_T, MPI_MAX, comm.comm(), &requests_[0]), "MPI_Iallreduce");
    mpi_check(MPI_Iallreduce(send_ + n, received_ + n, 1, MPI_INT64_T, MPI_SUM, comm.comm(), &requests_[1]),
              "MPI_Iallreduce");
  }
  Agreement(const Agreement&)            = delete;
  Agreement& operator=(const Agreement&) = delete;
  ~Agreement() {
    if (!done_) MPI_Waitall(2, requests_, MPI_STATUSES_IGNORE);
  }

  AgreementResult wait() {
    done_ = true;
    mpi_check(MPI_Waitall(2, requests_, MPI_STATUSES_IGNORE), "MPI_Waitall");
    return agreement_result(values_, received_);
  }

 private:
  AgreedValues values_;
  std::int64_t send_[2 * max_agreed_values + 1], received_[2 * max_agreed_values + 1];
  MPI_Request requests_[2];
  bool done_ = false;
};

template <class MemorySpace>
bool mpi_reads_directly(const distributed::MpiCommunicator& comm) {
  if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemorySpace>::accessible) return true;
#ifdef KOKKOS_ENABLE_CUDA
  if (std::is_same<MemorySpace, Kokkos::CudaSpace>::value) return comm.cuda_aware();
#endif
  (void)comm;
  return false;
}

/// view(i) = the merge of every rank's view(i), in place; blocks until done (the View's later users on `space`
/// may start at once).
template <class ExecSpace, class View>
void mpi_allreduce_merge(const ExecSpace& space, const distributed::MpiCommunicator& comm, const View& view) {
  using S = typename View::non_const_value_type;
  if (view.extent(0) > static_cast<std::size_t>(INT_MAX))
    throw std::invalid_argument("softfuse::distributed: more than INT_MAX rows or features per MPI reduction");
  const int n = static_cast<int>(view.extent(0));
  space.fence();  // the local pass wrote view
  const auto reduce = [&](S* data) {
    MPI_Request request;
    mpi_check(MPI_Iallreduce(MPI_IN_PLACE, data, n, MpiElement<S>::type(), MpiElement<S>::op(), comm.comm(), &request),
              "MPI_Iallreduce");
    mpi_check(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
  };
  if (mpi_reads_directly<typename View::memory_space>(comm)) {
    reduce(view.data());
    return;
  }
  Kokkos::View<S*, Kokkos::HostSpace> staged(Kokkos::view_alloc(Kokkos::WithoutInitializing, "softfuse::mpi_staging"),
                                             view.extent(0));
  Kokkos::deep_copy(staged, view);
  reduce(staged.data());
  Kokkos::deep_copy(view, staged);
}

template <class ExecSpace, class StatsView>
void allreduce_row_stats(const ExecSpace& space, const distributed::MpiCommunicator& comm, const StatsView& stats) {
  mpi_allreduce_merge(space, comm, stats);
}

template <class ExecSpace, class MomentsView>
void allreduce_feature_moments(const ExecSpace& space, const distributed::MpiCommunicator& comm,
                               const MomentsView& moments) {
  mpi_allreduce_merge(space, comm, moments);
}

}  // namespace Impl
}  // namespace softfuse

#endif
