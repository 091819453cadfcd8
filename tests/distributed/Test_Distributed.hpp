// softfuse::distributed against the single-process operations on the gathered data and against the fp64
// references of tests/reference, written once for every backend and communicator: include after a
// backends/Test_<Backend>.hpp and a Test_Distributed_<Mpi|Nccl>.hpp (test_communicator()); run under mpirun
// with any number of ranks (ctest runs 1 to 4 on the host backends).
//
// Tolerances. Against the single-process operation on the whole data: relative 1e-5 for float, 1e-10 for
// double, where the value is at least 1e-30 (absolutely below): both run the same local kernels; only the order
// in which the row sums (in double) and the batch statistics (in double) are combined differs (the layers are
// compared with their portable implementation: the CUDA specializations use other GEMMs). Against fp64:
// softmax relative 1e-5 / 1e-10; the layers within the error model of softfuse_reference_layers.hpp.
// Bit-identity across ranks: each rank's shard holds the same "probe" columns (softmax: equal values; GELU:
// equal weight rows), whose outputs depend only on the reduced row statistics (and, for GELU, on logits that
// the BLAS computes: checked where those are the same bits), so they must be the same bits on every rank; the
// running statistics of BatchNorm must be too. Shards are uneven and rank 1 has none.

#include <softfuse_distributed.hpp>
#include <softfuse_softmax.hpp>

#include <mpi.h>

#include <cstring>

#include "Test_LinearLayers_Common.hpp"
#include "softfuse_reference.hpp"

namespace TestDistributed {

using namespace TestLinearLayers;

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

template <class T>
constexpr double tolerance() {
  return sizeof(T) == 4 ? 1e-5 : 1e-10;
}

/// got[i] within tol[i] relative of want[i] (NaN where want is NaN; absolutely below 1e-30).
template <class T>
void expect_near(const std::vector<T>& got, const std::vector<double>& want, const std::vector<double>& tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < got.size() && bad < 5; ++i) {
    const double g = static_cast<double>(got[i]), w = want[i];
    const bool ok = std::isnan(w) ? std::isnan(g) : std::abs(g - w) <= tol[i] * std::max(std::abs(w), 1e-30);
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << " rank " << world_rank() << " element " << i << ": got " << g << ", expected " << w
                    << " (tolerance " << tol[i] << " relative)";
    }
  }
}

template <class T, class R>
void expect_near(const std::vector<T>& got, const std::vector<R>& want, double tol, const std::string& what) {
  expect_near(got, to_double(want), std::vector<double>(want.size(), tol), what);
}

/// FNV-1a over the values' bytes (every NaN hashed alike).
template <class T>
std::uint64_t hash_bytes(const std::vector<T>& v) {
  std::uint64_t h = 1469598103934665603ull;
  for (T x : v) {
    if (std::isnan(x)) x = std::numeric_limits<T>::quiet_NaN();
    unsigned char b[sizeof(T)];
    std::memcpy(b, &x, sizeof(T));
    for (unsigned char c : b) h = (h ^ c) * 1099511628211ull;
  }
  return h;
}

/// The rank that holds other bits than the first rank that `has` the values, or -1 (collective).
template <class T>
int rank_with_other_bits(const std::vector<T>& v, bool has) {
  const std::uint64_t mine[2] = {hash_bytes(v), has ? 1u : 0u};
  std::vector<std::uint64_t> all(2 * world_size());
  MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, MPI_COMM_WORLD);
  std::uint64_t first = 0;
  bool seen           = false;
  for (int r = 0; r < world_size(); ++r) {
    if (!all[2 * r + 1]) continue;
    if (!seen) first = all[2 * r];
    seen = true;
    if (all[2 * r] != first) return r;
  }
  return -1;
}

/// Every rank that `has` the values holds the same bits.
template <class T>
void expect_same_bits_on_every_rank(const std::vector<T>& v, bool has, const std::string& what) {
  const int r = rank_with_other_bits(v, has);
  EXPECT_EQ(r, -1) << what << ": rank " << r << " differs from the first rank holding them";
}

/// How a dimension is cut into ranks: rank r holds [offset[r], offset[r] + count[r]). Uneven, and rank 1 of
/// two or more holds nothing. `probe` leading entries of each non-empty shard are the probe.
struct Shards {
  std::vector<std::size_t> count, offset;
  std::size_t total = 0, probe = 0;

  Shards(int ranks, std::size_t base, std::size_t step, std::size_t probe_) : probe(probe_) {
    for (int r = 0; r < ranks; ++r) {
      const std::size_t n = (r == 1) ? 0 : probe + base + step * static_cast<std::size_t>(r);
      offset.push_back(total);
      count.push_back(n);
      total += n;
    }
  }
  std::size_t mine() const { return count[world_rank()]; }
  std::size_t first() const { return offset[world_rank()]; }
};

/// Columns [c0, c0 + n) of the row-major [rows, cols] matrix m.
template <class T>
std::vector<T> columns(const std::vector<T>& m, std::size_t rows, std::size_t cols, std::size_t c0, std::size_t n) {
  std::vector<T> out;
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = c0; j < c0 + n; ++j) out.push_back(m[i * cols + j]);
  return out;
}

// ---- softmax over column shards ----------------------------------------------------------------------

/// x [rows, total]: random, the probe columns equal in every shard, then special rows: a NaN in the last
/// rank's shard, a +inf in the first, a row of -inf, a row with every other rank's shard -inf (but the
/// probes), a row of huge values.
template <class T>
std::vector<T> softmax_input(const Shards& s, std::size_t rows, std::uint64_t seed) {
  std::vector<T> x           = random_values<T>(rows * s.total, -5, 5, seed);
  const std::vector<T> probe = random_values<T>(rows * s.probe, -5, 5, seed + 1);
  for (std::size_t r = 0; r < s.count.size(); ++r)
    for (std::size_t i = 0; i < rows && s.count[r]; ++i)
      for (std::size_t k = 0; k < s.probe; ++k) x[i * s.total + s.offset[r] + k] = probe[i * s.probe + k];
  // Specials outside the probe columns (except for whole rows), so the probes stay equal.
  const T inf = std::numeric_limits<T>::infinity();
  if (rows >= 5 && s.total > 0) {
    x[0 * s.total + s.total - 1] = std::numeric_limits<T>::quiet_NaN();
    x[1 * s.total + s.probe]     = inf;
    for (std::size_t j = 0; j < s.total; ++j) x[2 * s.total + j] = -inf;
    for (std::size_t r = 0; r < s.count.size(); r += 2)
      for (std::size_t j = s.offset[r] + s.probe; j < s.offset[r] + s.count[r]; ++j) x[3 * s.total + j] = -inf;
    for (std::size_t j = 0; j < s.total; ++j) x[4 * s.total + j] *= static_cast<T>(1e37);
  }
  return x;
}

template <class T>
void run_softmax(std::size_t rows, std::size_t base, std::size_t step, bool in_place, std::uint64_t seed) {
  const Shards s(world_size(), base, step, 3);
  const std::string what = std::string(sizeof(T) == 4 ? "float" : "double") + " softmax " + std::to_string(rows) +
                           " rows, " + std::to_string(s.total) + " columns" + (in_place ? " in place" : "");
  const std::vector<T> x = softmax_input<T>(s, rows, seed);
  TestExecSpace space;

  const auto x_all = device_matrix(x, rows, s.total, "x");
  const Kokkos::View<T**, Kokkos::LayoutRight, memory_space> y_all("y", rows, s.total);
  softfuse::softmax(space, x_all, y_all);
  space.fence();
  const std::vector<T> single = columns(host_values(y_all), rows, s.total, s.first(), s.mine());

  const auto x_mine = device_matrix(columns(x, rows, s.total, s.first(), s.mine()), rows, s.mine(), "x shard");
  const Kokkos::View<T**, Kokkos::LayoutRight, memory_space> y_mine("y shard", rows, s.mine());
  softfuse::distributed::softmax(space, test_communicator(), x_mine, in_place ? x_mine : y_mine);
  space.fence();
  const std::vector<T> got = host_values(in_place ? x_mine : y_mine);

  expect_near(got, single, tolerance<T>(), what + " against softfuse::softmax");
  std::vector<double> reference(rows * s.total);
  const std::vector<double> xd = to_double(x);
  for (std::size_t i = 0; i < rows; ++i)
    softfuse_test::reference_softmax_row(&xd[i * s.total], &reference[i * s.total], s.total);
  expect_near(got, columns(reference, rows, s.total, s.first(), s.mine()), tolerance<T>(), what + " against fp64");
  expect_same_bits_on_every_rank(columns(got, rows, s.mine(), 0, s.mine() ? s.probe : 0), s.mine() > 0,
                                 what + " probe columns");
}

TEST_F(TestCategory, distributed_softmax_float) {
  run_softmax<float>(9, 5, 7, false, 1);
  run_softmax<float>(9, 40, 1, true, 2);
  run_softmax<float>(3, 5000, 900, false, 3);
  run_softmax<float>(0, 5, 7, false, 4);
}
TEST_F(TestCategory, distributed_softmax_double) {
  run_softmax<double>(9, 5, 7, false, 11);
  run_softmax<double>(3, 5000, 900, true, 13);
}

// ---- Linear -> GELU -> softmax with the out features sharded -------------------------------------------

template <class T>
void run_gelu(std::size_t batch, std::size_t in, std::size_t base, std::size_t step, softfuse::Gelu gelu,
              std::uint64_t seed) {
  const Shards s(world_size(), base, step, 2);
  const std::size_t out  = s.total;
  const bool exact       = gelu == softfuse::Gelu::exact;
  const std::string what = std::string(sizeof(T) == 4 ? "float" : "double") + " linear_gelu_softmax " +
                           std::to_string(batch) + "x" + std::to_string(in) + "x" + std::to_string(out) +
                           (exact ? " exact" : " tanh");
  const std::vector<T> x = random_values<T>(batch * in, -1, 1, seed);
  std::vector<T> w = random_values<T>(out * in, -0.5, 0.5, seed + 1), b = random_values<T>(out, -1, 1, seed + 2);
  const std::vector<T> probe_w = random_values<T>(s.probe * in, -0.5, 0.5, seed + 3);
  for (std::size_t r = 0; r < s.count.size(); ++r)
    for (std::size_t k = 0; k < s.probe && s.count[r]; ++k) {
      for (std::size_t c = 0; c < in; ++c) w[(s.offset[r] + k) * in + c] = probe_w[k * in + c];
      b[s.offset[r] + k] = static_cast<T>(0.25 * k);
    }
  TestExecSpace space;
  const auto xv = device_matrix(x, batch, in, "x");

  const Kokkos::View<T**, Kokkos::LayoutRight, memory_space> y_all("y", batch, out);
  softfuse::linear_gelu_softmax(space, xv, device_matrix(w, out, in, "w"), device_vector(b, "b"), y_all, gelu,
                                softfuse::Implementation::portable);
  space.fence();
  const std::vector<T> single = columns(host_values(y_all), batch, out, s.first(), s.mine());

  const std::vector<T> w_mine(w.begin() + s.first() * in, w.begin() + (s.first() + s.mine()) * in);
  const std::vector<T> b_mine(b.begin() + s.first(), b.begin() + s.first() + s.mine());
  const Kokkos::View<T**, Kokkos::LayoutRight, memory_space> y_mine("y shard", batch, s.mine());
  softfuse::distributed::linear_gelu_softmax(space, test_communicator(), xv,
                                             device_matrix(w_mine, s.mine(), in, "w shard"),
                                             device_vector(b_mine, "b shard"), y_mine, gelu);
  space.fence();
  const std::vector<T> got = host_values(y_mine);
  expect_near(got, single, tolerance<T>(), what + " against softfuse::linear_gelu_softmax");

  std::vector<double> reference, tol;
  std::vector<double> z(out), peak(out), e(out), y(out), row_tol;
  for (std::size_t i = 0; i < batch; ++i) {
    softfuse_test::reference_linear_row(&x[i * in], w.data(), b.data(), in, out, z.data(), peak.data());
    for (std::size_t j = 0; j < out; ++j)
      e[j] = softfuse_test::logit_error(epsilon<T>(), in, peak[j], z[j], static_cast<double>(b[j]));
    softfuse_test::reference_gelu_softmax_row(z.data(), e.data(), out, exact, epsilon<T>(), y.data(), row_tol);
    for (std::size_t j = s.first(); j < s.first() + s.mine(); ++j) {
      reference.push_back(y[j]);
      tol.push_back(row_tol[j]);
    }
  }
  expect_near(got, reference, tol, what + " against fp64");
  // The probes' outputs depend only on their logits and the reduced row statistics. Their logits come from the
  // BLAS, whose bits for a weight row may depend on the shard's width (OpenBLAS' Haswell sgemm blocks the edges
  // of n otherwise than the rest): the outputs must be the same bits wherever the logits are.
  const Kokkos::View<T**, Kokkos::LayoutRight, memory_space> z_mine("z shard", batch, s.mine());
  softfuse::Impl::linear_gemm(space, xv, device_matrix(w_mine, s.mine(), in, "w shard"), z_mine);
  space.fence();
  const std::size_t probe = s.mine() ? s.probe : 0;
  if (rank_with_other_bits(columns(host_values(z_mine), batch, s.mine(), 0, probe), s.mine() > 0) == -1)
    expect_same_bits_on_every_rank(columns(got, batch, s.mine(), 0, probe), s.mine() > 0, what + " probe columns");
}

TEST_F(TestCategory, distributed_linear_gelu_softmax_float) {
  run_gelu<float>(6, 24, 5, 9, softfuse::Gelu::exact, 21);
  run_gelu<float>(5, 0, 3, 2, softfuse::Gelu::tanh, 22);
  run_gelu<float>(0, 8, 3, 2, softfuse::Gelu::exact, 23);
}
TEST_F(TestCategory, distributed_linear_gelu_softmax_double) {
  run_gelu<double>(6, 24, 5, 9, softfuse::Gelu::tanh, 31);
}

// ---- Linear -> BatchNorm -> scale -> softmax with the batch sharded --------------------------------------

template <class T>
void run_batchnorm(std::size_t base, std::size_t step, std::size_t in, std::size_t out, bool vector_scale,
                   softfuse::BatchNormMode mode, int steps, std::uint64_t seed) {
  const Shards s(world_size(), base, step, 0);
  const std::size_t batch = s.total;
  const bool training     = mode == softfuse::BatchNormMode::training;
  const std::string what  = std::string(sizeof(T) == 4 ? "float" : "double") + " linear_batchnorm_softmax " +
                           std::to_string(batch) + "x" + std::to_string(in) + "x" + std::to_string(out) +
                           (training ? " training" : " inference") + (vector_scale ? " vector-scale" : "");
  const std::vector<T> w = random_values<T>(out * in, -0.5, 0.5, seed), b = random_values<T>(out, 50, 60, seed + 1);
  const std::vector<T> gamma = random_values<T>(out, 0.5, 1.5, seed + 2), beta = random_values<T>(out, -1, 1, seed + 3);
  const std::vector<T> mean0 = random_values<T>(out, -1, 1, seed + 4), var0 = random_values<T>(out, 0.5, 2, seed + 5);
  const std::vector<T> scale = random_values<T>(vector_scale ? out : 1, 0.5, 2, seed + 6);
  using Vector               = Kokkos::View<T*, memory_space>;
  const auto wv              = device_matrix(w, out, in, "w");
  const auto bv = device_vector(b, "b"), sv = device_vector(scale, "scale");
  softfuse::BatchNorm<Vector> single{device_vector(gamma), device_vector(beta), device_vector(mean0),
                                     device_vector(var0)};
  softfuse::BatchNorm<Vector> mine{device_vector(gamma), device_vector(beta), device_vector(mean0),
                                   device_vector(var0)};
  single.mode = mine.mode      = mode;
  std::vector<double> ref_mean = to_double(mean0), ref_var = to_double(var0);
  std::vector<double> tol_mean(out, 0.0), tol_var(out, 0.0);
  TestExecSpace space;
  for (int k = 1; k <= steps; ++k) {
    const std::string at   = what + " step " + std::to_string(k);
    const std::vector<T> x = random_values<T>(batch * in, -1, 1, seed + 10 * k);
    const std::vector<T> x_mine(x.begin() + s.first() * in, x.begin() + (s.first() + s.mine()) * in);
    const Kokkos::View<T**, Kokkos::LayoutRight, memory_space> y_mine("y shard", s.mine(), out);
    const softfuse::Implementation ran = softfuse::distributed::linear_batchnorm_softmax(
        space, test_communicator(), device_matrix(x_mine, s.mine(), in, "x shard"), wv, bv, mine, sv, y_mine);
    // The single-process layer in the implementation that ran locally (inference mode is the single-process
    // layer itself; training runs the portable local passes).
    const Kokkos::View<T**, Kokkos::LayoutRight, memory_space> y_all("y", batch, out);
    softfuse::linear_batchnorm_softmax(space, device_matrix(x, batch, in, "x"), wv, bv, single, sv, y_all, ran);
    space.fence();
    const std::vector<T> got = host_values(y_mine);
    const std::vector<T> all = host_values(y_all);
    expect_near(got, std::vector<T>(all.begin() + s.first() * out, all.begin() + (s.first() + s.mine()) * out),
                tolerance<T>(), at + " y against softfuse::linear_batchnorm_softmax");

    // fp64: logits, the batch (or running) statistics, the rows; then the running statistics' update.
    std::vector<double> z(batch * out), e(batch * out), peak(out);
    for (std::size_t i = 0; i < batch; ++i) {
      softfuse_test::reference_linear_row(&x[i * in], w.data(), b.data(), in, out, &z[i * out], peak.data());
      for (std::size_t j = 0; j < out; ++j)
        e[i * out + j] =
            softfuse_test::logit_error(epsilon<T>(), in, peak[j], z[i * out + j], static_cast<double>(b[j]));
    }
    softfuse_test::FeatureStats stats{ref_mean, ref_var, std::vector<double>(out, 0.0)};
    if (training) stats = softfuse_test::reference_batch_stats(z, e, batch, out);
    std::vector<double> reference, tol, row(out), row_tol;
    const std::vector<double> gd = to_double(gamma), bd = to_double(beta), sd = to_double(scale);
    for (std::size_t i = s.first(); i < s.first() + s.mine(); ++i) {
      softfuse_test::reference_batchnorm_softmax_row(&z[i * out], &e[i * out], stats, gd.data(), bd.data(), sd.data(),
                                                     sd.size(), mine.eps, out, epsilon<T>(), row.data(), row_tol);
      reference.insert(reference.end(), row.begin(), row.end());
      tol.insert(tol.end(), row_tol.begin(), row_tol.end());
    }
    expect_near(got, reference, tol, at + " y against fp64");
    if (training)
      softfuse_test::reference_running_update(stats, batch, mine.momentum, epsilon<T>(), ref_mean, ref_var, tol_mean,
                                              tol_var);

    const std::vector<T> mean = host_values(mine.running_mean), var = host_values(mine.running_var);
    expect_near(mean, host_values(single.running_mean), tolerance<T>(), at + " running_mean against single");
    expect_near(var, host_values(single.running_var), tolerance<T>(), at + " running_var against single");
    for (std::size_t j = 0; j < out; ++j) {
      EXPECT_NEAR(mean[j], ref_mean[j], tol_mean[j] + 2 * epsilon<T>() * std::abs(ref_mean[j]))
          << at << " running_mean " << j;
      EXPECT_NEAR(var[j], ref_var[j], tol_var[j] + 2 * epsilon<T>() * std::abs(ref_var[j]))
          << at << " running_var " << j;
    }
    expect_same_bits_on_every_rank(mean, true, at + " running_mean");
    expect_same_bits_on_every_rank(var, true, at + " running_var");
  }
}

TEST_F(TestCategory, distributed_linear_batchnorm_softmax_float) {
  run_batchnorm<float>(5, 3, 16, 24, false, softfuse::BatchNormMode::training, 3, 41);
  run_batchnorm<float>(40, 7, 33, 70, true, softfuse::BatchNormMode::training, 2, 42);
  run_batchnorm<float>(5, 3, 16, 24, true, softfuse::BatchNormMode::inference, 1, 43);
}
TEST_F(TestCategory, distributed_linear_batchnorm_softmax_double) {
  run_batchnorm<double>(5, 3, 16, 24, true, softfuse::BatchNormMode::training, 3, 51);
}

// ---- wrong arguments: every rank throws, and the ranks stay in step -------------------------------------

template <class F>
std::string thrown(const F& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST_F(TestCategory, distributed_bad_arguments) {
  using V          = Kokkos::View<float**, Kokkos::LayoutRight, memory_space>;
  using Vector     = Kokkos::View<float*, memory_space>;
  const auto& comm = test_communicator();
  const int rank = world_rank(), size = world_size();
  TestExecSpace space;

  if (size > 1) {  // rows differ across ranks
    const V x("x", 4 + (rank == 0), 3);
    EXPECT_NE(thrown([&] {
                softfuse::distributed::softmax(space, comm, x, x);
              }).find("softfuse::distributed::softmax: every rank must pass the same number of rows"),
              std::string::npos);
  }
  {  // y's extents wrong on rank 0 only
    const V x("x", 4, 3), y("y", 4, rank == 0 ? 2 : 3);
    const std::string message = thrown([&] { softfuse::distributed::softmax(space, comm, x, y); });
    EXPECT_NE(message.find(rank == 0 ? "softfuse::distributed::softmax: x and y must have the same extents"
                                     : "softfuse::distributed::softmax: invalid arguments on another rank"),
              std::string::npos)
        << message;
  }
  {  // in differs across ranks; and a batch of one row in training mode
    const std::size_t in = size > 1 ? 4 + rank : 4;
    const V x("x", rank == 0 ? 1 : 0, in), w("w", 5, in), y("y", rank == 0 ? 1 : 0, 5);
    const Vector b("b", 5), scale("scale", 1);
    softfuse::BatchNorm<Vector> bn{Vector("g", 5), Vector("b", 5), Vector("m", 5), Vector("v", 5)};
    const std::string message =
        thrown([&] { softfuse::distributed::linear_batchnorm_softmax(space, comm, x, w, b, bn, scale, y); });
    EXPECT_NE(message.find(
                  size > 1 ? "softfuse::distributed::linear_batchnorm_softmax: every rank must pass the same in"
                           : "softfuse::distributed::linear_batchnorm_softmax: training mode needs more than one row"),
              std::string::npos)
        << message;
    EXPECT_NE(thrown([&] {
                softfuse::distributed::linear_gelu_softmax(space, comm, x, w, b, V("y", 1, 4));
              }).find("softfuse::distributed::linear_gelu_softmax: "),
              std::string::npos);
  }
  // The ranks are still in step: a valid call works.
  run_softmax<float>(9, 5, 7, false, 99);
}

}  // namespace TestDistributed
