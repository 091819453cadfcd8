// softfuse --distributed: the reference workloads with softfuse::distributed under mpirun, weak scaling (each
// rank holds the single-GPU sizes), timed per step on the slowest rank, and checked on rank 0 against the fp64
// reference (softmax) and against the single-process operation on the gathered data. Included by
// softfuse_cli.cpp after its helpers (Options, fill, sample, Check, median).

#include <mpi.h>
#include <softfuse_distributed.hpp>

#include <ctime>
#include <fstream>
#include <sstream>

namespace {

/// x(i, j) = the value the whole [rows, ld] matrix holds at (i, col0 + j): shards of one global matrix.
template <class View>
struct FillShard {
  View v;
  std::uint64_t seed;
  std::int64_t ld, col0;
  double lo, hi;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i, const std::int64_t j) const {
    v(i, j) = static_cast<typename View::value_type>(lo + (hi - lo) * hash_uniform(seed, i * ld + col0 + j));
  }
};

template <class Space, class View>
void fill_shard(const Space& space, const View& v, std::uint64_t seed, std::int64_t ld, std::int64_t col0, double lo,
                double hi) {
  using policy = Kokkos::MDRangePolicy<Space, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>;
  Kokkos::parallel_for("fill shard", policy(space, {0, 0}, {std::int64_t(v.extent(0)), std::int64_t(v.extent(1))}),
                       FillShard<View>{v, seed, ld, col0, lo, hi});
}

template <class Space, class Comm>
struct DistributedRunner {
  using Memory     = typename Space::memory_space;
  using Matrix     = Kokkos::View<float**, Kokkos::LayoutRight, Memory>;
  using Vector     = Kokkos::View<float*, Memory>;
  using HostMatrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;

  const Options& opt;
  Space space;
  const Comm& comm;
  int rank, size;
  std::ostringstream json;  // this workload's JSON fields

  DistributedRunner(const Options& o, const Space& s, const Comm& c, int r, int n)
      : opt(o), space(s), comm(c), rank(r), size(n) {}

  /// Per-step times after one untimed step: each starts after a barrier and counts until the slowest rank's
  /// fence.
  template <class F>
  std::vector<double> step_times(F&& run) {
    run();
    space.fence();
    std::vector<double> t;
    for (int r = 0; r < opt.reps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      Kokkos::Timer timer;
      run();
      space.fence();
      double mine = timer.seconds(), slowest = 0;
      MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      t.push_back(slowest);
    }
    return t;
  }

  void report_times(const std::vector<double>& t, double bytes_or_flops, const char* unit) {
    const double m = softfuse_bench::median(t);
    if (rank == 0)
      std::printf("  time     %.3f ms per step (median of %d, slowest rank)   %.1f %s per rank\n", m * 1e3, opt.reps,
                  bytes_or_flops / m * 1e-9, unit);
    json << "\"median_ms\": " << m * 1e3 << ", \"times_ms\": [";
    for (std::size_t k = 0; k < t.size(); ++k) json << (k ? ", " : "") << t[k] * 1e3;
    json << "], ";
  }

  /// The [rows, cols] shards of every rank side by side on rank 0: [rows, size * cols].
  HostMatrix gather_columns(const Matrix& m) const {
    const auto h            = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m);
    const std::int64_t rows = m.extent(0), cols = m.extent(1);
    std::vector<float> all(rank == 0 ? rows * cols * size : 0);
    MPI_Gather(h.data(), static_cast<int>(rows * cols), MPI_FLOAT, all.data(), static_cast<int>(rows * cols), MPI_FLOAT,
               0, MPI_COMM_WORLD);
    HostMatrix g("gathered", rank == 0 ? rows : 0, cols * size);
    if (rank == 0)
      for (int r = 0; r < size; ++r)
        for (std::int64_t i = 0; i < rows; ++i)
          for (std::int64_t j = 0; j < cols; ++j) g(i, r * cols + j) = all[(r * rows + i) * cols + j];
    return g;
  }

  /// The [rows, cols] blocks of every rank stacked on rank 0: [size * rows, cols].
  HostMatrix gather_rows(const Matrix& m) const {
    const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m);
    HostMatrix g("gathered", rank == 0 ? m.extent(0) * size : 0, m.extent(1));
    const int n = static_cast<int>(m.extent(0) * m.extent(1));
    MPI_Gather(h.data(), n, MPI_FLOAT, g.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    return g;
  }

  static double max_relative_difference(const HostMatrix& a, const HostMatrix& b) {
    double m = 0;
    for (std::size_t i = 0; i < a.extent(0); ++i)
      for (std::size_t j = 0; j < a.extent(1); ++j) {
        const double d = std::abs(double(a(i, j)) - b(i, j)) / std::max(std::abs(double(b(i, j))), 1e-30);
        m              = (d > m || d != d) ? d : m;
      }
    return m;
  }

  /// Rank 0's comparison with the single-process result, as a verdict for every rank.
  bool cross(const char* key, const char* what, double difference, double limit) {
    int pass = rank != 0 || difference <= limit;
    if (rank == 0)
      std::printf("  cross    %s: max rel difference %.2e (limit %.0e): %s\n", what, difference, limit,
                  pass ? "PASS" : "FAIL");
    MPI_Bcast(&pass, 1, MPI_INT, 0, MPI_COMM_WORLD);
    json << "\"" << key << "\": " << difference << ", ";
    return pass;
  }

  bool softmax() {
    const std::int64_t rows = opt.dim(opt.rows, 4096), cols = opt.dim(opt.cols, 393216), ld = cols * size;
    if (rank == 0)
      std::printf("distributed softmax: %lld x %lld fp32 per rank, rows of %lld over %d ranks, on %s\n",
                  (long long)rows, (long long)cols, (long long)ld, size, backend_name(space).c_str());
    json << "\"shape_per_rank\": [" << rows << ", " << cols << "], \"shape\": [" << rows << ", " << ld << "], ";
    const Matrix x(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("x")), rows, cols);
    const Matrix y(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("y")), rows, cols);
    fill_shard(space, x, opt.seed, ld, rank * cols, 0, 1);
    Kokkos::deep_copy(space, y, 0.0f);
    const auto run = [&] { softfuse::distributed::softmax(space, comm, x, y); };
    run();
    space.fence();

    // fp64 reference of sampled rows, gathered on rank 0.
    const bool small = rows * ld <= (std::int64_t(1) << 24);
    Check check;
    std::vector<double> xd(ld), ref(ld);
    std::vector<float> xr(rank == 0 ? ld : 0), yr(rank == 0 ? ld : 0);
    for (const auto i : sample(rows, small ? rows : opt.check_rows)) {
      const auto hx = Runner<Space>::host_row(x, i), hy = Runner<Space>::host_row(y, i);
      MPI_Gather(hx.data(), static_cast<int>(cols), MPI_FLOAT, xr.data(), static_cast<int>(cols), MPI_FLOAT, 0,
                 MPI_COMM_WORLD);
      MPI_Gather(hy.data(), static_cast<int>(cols), MPI_FLOAT, yr.data(), static_cast<int>(cols), MPI_FLOAT, 0,
                 MPI_COMM_WORLD);
      if (rank != 0) continue;
      for (std::int64_t j = 0; j < ld; ++j) xd[j] = xr[j];
      softfuse_test::reference_softmax_row(xd.data(), ref.data(), ld);
      for (std::int64_t j = 0; j < ld; ++j) check.add(yr[j], ref[j], 1e-5);
    }
    int pass = rank != 0 || check.ok();
    if (rank == 0) check.print("sampled rows vs fp64");
    MPI_Bcast(&pass, 1, MPI_INT, 0, MPI_COMM_WORLD);
    bool ok = pass;
    if (small) {  // the single-process softmax of the gathered rows
      const HostMatrix gx = gather_columns(x), gy = gather_columns(y);
      double d = 0;
      if (rank == 0) {
        const HostMatrix single("single", rows, ld);
        softfuse::softmax(Kokkos::DefaultHostExecutionSpace(), gx, single);
        Kokkos::DefaultHostExecutionSpace().fence();
        d = max_relative_difference(gy, single);
      }
      ok = cross("single_process_max_rel_difference", "vs softfuse::softmax of the gathered rows", d, 1e-5) && ok;
    }
    report_times(step_times(run), 8.0 * rows * cols, "GB/s (one read and one write of x)");
    return ok;
  }

  bool linear_gelu_softmax() {
    const std::int64_t batch = opt.dim(opt.batch, 1024), in = opt.dim(opt.in, 8192), out = opt.dim(opt.out, 8192);
    const auto gelu = opt.gelu_exact ? softfuse::Gelu::exact : softfuse::Gelu::tanh;
    if (rank == 0)
      std::printf(
          "distributed linear_gelu_softmax: %lld x %lld x %lld fp32 per rank (out features sharded, %lld in "
          "all over %d ranks), on %s\n",
          (long long)batch, (long long)in, (long long)out, (long long)out * size, size, backend_name(space).c_str());
    json << "\"shape_per_rank\": [" << batch << ", " << in << ", " << out << "], \"shape\": [" << batch << ", " << in
         << ", " << out * size << "], ";
    const Matrix x("x", batch, in), w("weight", out, in), y("y", batch, out), b2("bias", 1, out);
    const double bound = 1 / std::sqrt(double(in));
    fill_shard(space, x, opt.seed, in, 0, 0, 1);
    fill_shard(space, w, opt.seed + 1, in, rank * out * in, -bound, bound);  // rows rank * out ... of the weight
    fill_shard(space, b2, opt.seed + 2, 0, rank * out, -bound, bound);
    const Vector b = Kokkos::subview(b2, 0, Kokkos::ALL);
    const auto run = [&] { softfuse::distributed::linear_gelu_softmax(space, comm, x, w, b, y, gelu); };
    run();
    space.fence();
    bool ok = true;
    if (batch * in * out * size <= (std::int64_t(1) << 27)) {
      const HostMatrix gy = gather_columns(y), gb = gather_columns(b2), gw = gather_rows(w);
      const auto hx = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), x);
      double d      = 0;
      if (rank == 0) {
        const HostMatrix single("single", batch, out * size);
        softfuse::linear_gelu_softmax(Kokkos::DefaultHostExecutionSpace(), hx, gw, Kokkos::subview(gb, 0, Kokkos::ALL),
                                      single, gelu);
        Kokkos::DefaultHostExecutionSpace().fence();
        d = max_relative_difference(gy, single);
      }
      ok = cross("single_process_max_rel_difference", "vs softfuse::linear_gelu_softmax of the gathered layer (host)",
                 d, 1e-4);
    }
    report_times(step_times(run), 2.0 * batch * in * out, "GFLOP/s");
    return ok;
  }

  bool linear_batchnorm_softmax() {
    const std::int64_t batch = opt.dim(opt.batch, 1024), in = opt.dim(opt.in, 8192), out = opt.dim(opt.out, 8192);
    if (rank == 0)
      std::printf(
          "distributed linear_batchnorm_softmax: %lld x %lld x %lld fp32 per rank (batch sharded, %lld rows "
          "over %d ranks), %s, on %s\n",
          (long long)batch, (long long)in, (long long)out, (long long)batch * size, size,
          opt.training ? "training" : "inference", backend_name(space).c_str());
    json << "\"shape_per_rank\": [" << batch << ", " << in << ", " << out << "], \"shape\": [" << batch * size << ", "
         << in << ", " << out << "], ";
    const Matrix x("x", batch, in), w("weight", out, in), y("y", batch, out), p("parameters", 4, out);
    const double bound = 1 / std::sqrt(double(in));
    fill_shard(space, x, opt.seed, in, rank * batch * in, 0, 1);
    fill_shard(space, w, opt.seed + 1, in, 0, -bound, bound);
    fill_shard(space, p, opt.seed + 2, out, 0, 0.5, 1.5);  // bias, gamma, beta, scale
    const auto row     = [&](int k) { return Vector(Kokkos::subview(p, k, Kokkos::ALL)); };
    const auto make_bn = [&] {
      softfuse::BatchNorm<Vector> bn{row(1), row(2), Vector("running_mean", out), Vector("running_var", out)};
      Kokkos::deep_copy(space, bn.running_var, 1.0f);
      bn.mode      = opt.training ? softfuse::BatchNormMode::training : softfuse::BatchNormMode::inference;
      bn.workspace = Vector("workspace", 3 * out);
      return bn;
    };
    const auto bn      = make_bn();
    const Vector scale = opt.vector_scale ? row(3) : Vector(Kokkos::subview(p, 3, std::make_pair(0, 1)));
    const auto run = [&] { softfuse::distributed::linear_batchnorm_softmax(space, comm, x, w, row(0), bn, scale, y); };
    run();
    space.fence();
    bool ok = true;
    if (batch * size * in * out <= (std::int64_t(1) << 27)) {  // one step of the single-process layer on rank 0
      const HostMatrix gx = gather_rows(x), gy = gather_rows(y);
      const auto hw   = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), w);
      const auto hp   = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p);
      const auto h_rm = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), bn.running_mean);
      const auto h_rv = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), bn.running_var);
      double d = 0, d_stats = 0;
      if (rank == 0) {
        using HostVector = Kokkos::View<float*, Kokkos::HostSpace>;
        const auto hrow  = [&](int k) { return HostVector(Kokkos::subview(hp, k, Kokkos::ALL)); };
        softfuse::BatchNorm<HostVector> hbn{hrow(1), hrow(2), HostVector("running_mean", out),
                                            HostVector("running_var", out), bn.mode};
        Kokkos::deep_copy(hbn.running_var, 1.0f);
        const HostVector hscale = opt.vector_scale ? hrow(3) : HostVector(Kokkos::subview(hp, 3, std::make_pair(0, 1)));
        const HostMatrix single("single", batch * size, out);
        softfuse::linear_batchnorm_softmax(Kokkos::DefaultHostExecutionSpace(), gx, hw, hrow(0), hbn, hscale, single);
        Kokkos::DefaultHostExecutionSpace().fence();
        d = max_relative_difference(gy, single);
        for (std::int64_t j = 0; j < out; ++j) {
          d_stats = std::max(d_stats, std::abs(h_rm(j) - hbn.running_mean(j)) /
                                          std::max(1e-30, double(std::abs(hbn.running_mean(j)))));
          d_stats = std::max(
              d_stats, std::abs(h_rv(j) - hbn.running_var(j)) / std::max(1e-30, double(std::abs(hbn.running_var(j)))));
        }
      }
      ok = cross("single_process_max_rel_difference",
                 "y vs softfuse::linear_batchnorm_softmax of the gathered batch (host)", d, 2e-4);
      ok = cross("running_stats_max_rel_difference", "running statistics vs the same", d_stats, 1e-5) && ok;
    }
    report_times(step_times(run), 2.0 * batch * in * out, "GFLOP/s");
    return ok;
  }
};

std::string devices_json(const std::string& mine, int rank, int size) {
  char name[256] = {};
  std::snprintf(name, sizeof name, "%s", mine.c_str());
  std::vector<char> all(rank == 0 ? sizeof name * size : 0);
  MPI_Gather(name, sizeof name, MPI_CHAR, all.data(), sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
  std::string s = "[";
  for (int r = 0; rank == 0 && r < size; ++r) s += std::string(r ? ", \"" : "\"") + &all[r * sizeof name] + "\"";
  return s + "]";
}

template <class Space, class Comm>
bool run_distributed_on(const Options& opt, const Comm& comm, const char* engine, const std::string& command) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Space space;
  const std::string devices = devices_json(backend_name(space), rank, size);
  std::ostringstream json;
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  json << "{\"date\": \"" << date << "\", \"command\": \"" << command << "\", \"ranks\": " << size << ", \"engine\": \""
       << engine << "\", \"devices\": " << devices << ", \"workloads\": [";
  bool ok = true;
  for (std::size_t k = 0; k < opt.workloads.size(); ++k) {
    DistributedRunner<Space, Comm> runner(opt, space, comm, rank, size);
    const auto& w   = opt.workloads[k];
    const bool pass = w == "softmax"               ? runner.softmax()
                      : w == "linear_gelu_softmax" ? runner.linear_gelu_softmax()
                                                   : runner.linear_batchnorm_softmax();
    if (rank == 0) progress("distributed %s on %d ranks (%s): %s", w.c_str(), size, engine, pass ? "PASS" : "FAIL");
    json << (k ? ", " : "") << "{\"workload\": \"" << w << "\", " << runner.json.str()
         << "\"pass\": " << (pass ? "true" : "false") << "}";
    ok = ok && pass;
  }
  json << "]}\n";
  if (rank == 0 && !opt.json.empty()) std::ofstream(opt.json) << json.str();
  return ok;
}

/// main() of --distributed: MPI, then Kokkos (on GPUs, each rank picks its device by local rank with
/// --kokkos-num-devices=N), the workloads, PASS / FAIL from every rank.
int run_distributed(const Options& opt, int argc, char* argv[]) {
  std::string command;
  for (int a = 0; a < argc; ++a) command += (a ? " " : "") + std::string(argv[a]);
  MPI_Init(&argc, &argv);
  int rank = 0, status = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Kokkos::initialize(argc, argv);
  try {
    run_clock().reset();
    bool ok = false;
    if (opt.nccl) {
#if defined(SOFTFUSE_HAVE_NCCL) && defined(KOKKOS_ENABLE_CUDA)
      const ncclComm_t nccl = softfuse::distributed::nccl_comm_from_mpi(MPI_COMM_WORLD);
      ok = run_distributed_on<Kokkos::Cuda>(opt, softfuse::distributed::NcclCommunicator(nccl), "nccl", command);
      ncclCommDestroy(nccl);
#else
      throw std::runtime_error("--nccl needs Kokkos::Cuda and softfuse built with -DSOFTFUSE_ENABLE_NCCL=ON");
#endif
    } else {
      const softfuse::distributed::MpiCommunicator comm(MPI_COMM_WORLD);
      ok = opt.host ? run_distributed_on<Kokkos::DefaultHostExecutionSpace>(opt, comm, "mpi", command)
                    : run_distributed_on<Kokkos::DefaultExecutionSpace>(opt, comm, "mpi", command);
    }
    int mine = ok ? 0 : 1;
    MPI_Allreduce(&mine, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) std::printf("result: %s\n", status ? "FAIL" : "PASS");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "softfuse: error on rank %d: %s\n", rank, e.what());
    Kokkos::finalize();
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  Kokkos::finalize();
  MPI_Finalize();
  return status;
}

}  // namespace
