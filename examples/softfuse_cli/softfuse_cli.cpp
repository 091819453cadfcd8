// softfuse — the three reference workloads (shared/WORKLOADS.md) on the best backend built, timed, and
// checked against the double-precision reference of tests/reference.

#include <KokkosKernels_config.h>
#include <Kokkos_Core.hpp>
#include <softfuse.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

#include "bench_timing.hpp"
#include "softfuse_reference_layers.hpp"

namespace {

const char* const usage_text = R"(usage: softfuse [WORKLOAD] [OPTIONS]

Runs the reference workloads in fp32 on Kokkos' default execution space (the CUDA-specialized softmax is
used automatically where it was built), prints time, throughput and the largest error against an fp64
reference, and exits non-zero when a check fails.

WORKLOAD (default: all three, at full size)
  softmax                    softmax over the rows of x [rows, cols]                    (4096 x 393216)
  linear_batchnorm_softmax   Linear -> BatchNorm1d -> scale -> softmax, x [batch, in],
                             weight [out, in]                                           (1024 x 8192 x 8192)
  linear_gelu_softmax        Linear -> GELU -> softmax, same shapes                     (1024 x 8192 x 8192)
  all                        the three in turn

OPTIONS
  --size F                   every dimension times F (e.g. 0.25)
  --rows N, --cols N         softmax shape
  --batch N, --in N, --out N fused-layer shapes
  --mode training|inference  BatchNorm mode (default training)
  --scale scalar|vector      BatchNorm scale: one learnable scalar (default) or one per feature
  --gelu exact|tanh          GELU (default exact, the erf one)
  --implementation auto|portable|specialized   force a path (default auto)
  --precision fp32|tf32|tf32x3  the fused layers' GEMM (default fp32; tf32 and tf32x3 run on the CUDA
                             specialization's tensor cores, the portable path computes in fp32); checked
                             against fp64 at the mode's documented tolerance
  --host                     run on Kokkos::DefaultHostExecutionSpace instead
  --cross-check              run the same inputs on the host too and report the largest difference
  --reps N                   timed runs after one warm-up; the median is reported (default 5)
  --check-rows N             rows checked against fp64 (default 16; all rows of small workloads)
  --check-cols N             features whose batch statistics are checked (training; default 64)
  --seed N                   input seed (default 1)
  -h, --help                 this text

DISTRIBUTED (built with -DSOFTFUSE_ENABLE_MPI=ON; run under mpirun, one GPU per rank)
  --distributed              run WORKLOAD (softmax, gelu = linear_gelu_softmax, batchnorm =
                             linear_batchnorm_softmax) with softfuse::distributed, weak scaling: each rank holds
                             the sizes above (softmax: a [rows, cols] column shard; gelu: `out` features;
                             batchnorm: `batch` rows of the batch), timed per step (slowest rank, median), and
                             checked against the single-process operation on the gathered data
  --nccl                     NCCL instead of MPI (Kokkos::Cuda, -DSOFTFUSE_ENABLE_NCCL=ON)
  --json FILE                rank 0 writes the timing and the check as JSON
Kokkos' own options (--kokkos-threads=N, ...) are passed to Kokkos.

What is checked. softmax: each checked row against the fp64 softmax of the same fp32 input (relative error,
tolerance 1e-5). Fused layers: each checked row's logits are recomputed in fp64 from the fp32 inputs and
the row compared within the tolerance of the error model of tests/reference/softfuse_reference_layers.hpp
(fp32 GEMM accumulation ~ sqrt(in) eps). BatchNorm training: the running statistics start at zero, so after
the first step they hold momentum times the batch mean (bias included) and unbiased variance; those are
checked against fp64 statistics over all rows for the checked features, and the checked rows are
normalized with the statistics the device reported (the fp64 reference of every row would need the whole
fp64 GEMM).
)";

Kokkos::Timer& run_clock() {
  static Kokkos::Timer timer;
  return timer;
}

template <class... Args>
void progress(const char* format, Args... args) {
  std::fprintf(stderr, "[softfuse %7.1f s] ", run_clock().seconds());
  std::fprintf(stderr, format, args...);
  std::fputc('\n', stderr);
}

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  std::vector<std::string> workloads;
  double size       = 1;
  std::int64_t rows = -1, cols = -1, batch = -1, in = -1, out = -1;
  bool training = true, vector_scale = false, gelu_exact = true, host = false, cross_check = false;
  bool distributed = false, nccl = false;
  std::string json;
  softfuse::Implementation implementation = softfuse::Implementation::automatic;
  softfuse::Precision precision           = softfuse::Precision::fp32;
  int reps = 5, check_rows = 16, check_cols = 64;
  std::uint64_t seed = 1;

  std::int64_t dim(std::int64_t set, std::int64_t reference) const {
    return set > 0 ? set : std::max<std::int64_t>(1, std::llround(reference * size));
  }
};

std::int64_t parse_int(const std::string& name, const std::string& v, std::int64_t min) {
  std::size_t used = 0;
  long long n      = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size() || n < min)
    throw UsageError(name + " needs an integer >= " + std::to_string(min) + ", got '" + v + "'");
  return n;
}

Options parse(int argc, char* argv[]) {
  Options o;
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a], value;
    if (arg.rfind("--kokkos", 0) == 0) continue;  // Kokkos' own
    if (arg == "-h" || arg == "--help") throw UsageError("");
    if (arg.rfind("--", 0) != 0) {
      if (arg == "gelu") arg = "linear_gelu_softmax";
      if (arg == "batchnorm") arg = "linear_batchnorm_softmax";
      if (arg != "all" && arg != "softmax" && arg != "linear_batchnorm_softmax" && arg != "linear_gelu_softmax")
        throw UsageError("unknown workload '" + arg + "'");
      o.workloads.push_back(arg);
      continue;
    }
    if (arg == "--host") {
      o.host = true;
      continue;
    }
    if (arg == "--distributed" || arg == "--nccl") {
      (arg == "--nccl" ? o.nccl : o.distributed) = true;
      continue;
    }
    if (arg == "--cross-check") {
      o.cross_check = true;
      continue;
    }
    const auto eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg   = arg.substr(0, eq);
    } else if (a + 1 < argc) {
      value = argv[++a];
    } else {
      throw UsageError(arg + " needs a value");
    }
    const auto choose = [&](const char* a_name, const char* b_name) {
      if (value != a_name && value != b_name)
        throw UsageError(arg + " must be " + a_name + " or " + b_name + ", got '" + value + "'");
      return value == a_name;
    };
    if (arg == "--size") {
      char* end = nullptr;
      o.size    = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || !(o.size > 0)) throw UsageError("--size needs a number > 0");
    } else if (arg == "--rows")
      o.rows = parse_int(arg, value, 1);
    else if (arg == "--cols")
      o.cols = parse_int(arg, value, 1);
    else if (arg == "--batch")
      o.batch = parse_int(arg, value, 1);
    else if (arg == "--in")
      o.in = parse_int(arg, value, 1);
    else if (arg == "--out")
      o.out = parse_int(arg, value, 1);
    else if (arg == "--mode")
      o.training = choose("training", "inference");
    else if (arg == "--scale")
      o.vector_scale = !choose("scalar", "vector");
    else if (arg == "--gelu")
      o.gelu_exact = choose("exact", "tanh");
    else if (arg == "--reps")
      o.reps = static_cast<int>(parse_int(arg, value, 1));
    else if (arg == "--check-rows")
      o.check_rows = static_cast<int>(parse_int(arg, value, 1));
    else if (arg == "--check-cols")
      o.check_cols = static_cast<int>(parse_int(arg, value, 1));
    else if (arg == "--json")
      o.json = value;
    else if (arg == "--seed")
      o.seed = static_cast<std::uint64_t>(parse_int(arg, value, 0));
    else if (arg == "--implementation") {
      if (value == "auto")
        o.implementation = softfuse::Implementation::automatic;
      else if (value == "portable")
        o.implementation = softfuse::Implementation::portable;
      else if (value == "specialized")
        o.implementation = softfuse::Implementation::specialized;
      else
        throw UsageError("--implementation must be auto, portable or specialized, got '" + value + "'");
    } else if (arg == "--precision") {
      if (value == "fp32")
        o.precision = softfuse::Precision::fp32;
      else if (value == "tf32")
        o.precision = softfuse::Precision::tf32;
      else if (value == "tf32x3")
        o.precision = softfuse::Precision::tf32x3;
      else
        throw UsageError("--precision must be fp32, tf32 or tf32x3, got '" + value + "'");
    } else {
      throw UsageError("unknown option " + arg);
    }
  }
  if (o.workloads.empty() || std::find(o.workloads.begin(), o.workloads.end(), "all") != o.workloads.end())
    o.workloads = {"softmax", "linear_batchnorm_softmax", "linear_gelu_softmax"};
  return o;
}

// ---- inputs: a counter-based hash, so values depend only on (seed, stream, index), never on the backend.

KOKKOS_INLINE_FUNCTION double hash_uniform(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed * 0xD1B54A32D192ED03ull + index * 0x9E3779B97F4A7C15ull;
  z               = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z               = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

template <class View>
struct FillUniform {
  View v;
  std::uint64_t seed;
  double lo, hi;
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i) const {
    v(i) = static_cast<typename View::value_type>(lo + (hi - lo) * hash_uniform(seed, i));
  }
  KOKKOS_INLINE_FUNCTION void operator()(const std::int64_t i, const std::int64_t j) const {
    v(i, j) = static_cast<typename View::value_type>(lo + (hi - lo) * hash_uniform(seed, i * v.extent(1) + j));
  }
};

template <class Space, class View>
void fill(const Space& space, const View& v, std::uint64_t seed, double lo, double hi) {
  const FillUniform<View> f{v, seed, lo, hi};
  if constexpr (static_cast<int>(View::rank) == 1) {
    Kokkos::parallel_for("fill", Kokkos::RangePolicy<Space, Kokkos::IndexType<std::int64_t>>(space, 0, v.extent(0)), f);
  } else {
    using policy = Kokkos::MDRangePolicy<Space, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>;
    Kokkos::parallel_for("fill", policy(space, {0, 0}, {std::int64_t(v.extent(0)), std::int64_t(v.extent(1))}), f);
  }
}

// ---- timing and reporting

using softfuse_bench::median_seconds;

/// k indices spread evenly over [0, n), first and last included; all of them when k >= n.
std::vector<std::int64_t> sample(std::int64_t n, std::int64_t k) {
  std::vector<std::int64_t> s;
  for (std::int64_t t = 0; t < std::min(n, k); ++t)
    s.push_back(k >= n ? t : k == 1 ? 0 : static_cast<std::int64_t>(std::llround(double(t) * (n - 1) / (k - 1))));
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

/// Largest error against a reference, and against its tolerance.
struct Check {
  double max_err = 0, max_ratio = 0, max_tol = 0;
  std::size_t count = 0;
  void add(double value, double ref, double tol) {  // relative
    const double err = std::abs(value - ref) / std::max(std::abs(ref), 1e-37);
    max_err          = std::max(max_err, err);
    max_tol          = std::max(max_tol, tol);
    max_ratio        = std::max(max_ratio, (err <= tol) ? err / tol : std::isnan(err) ? INFINITY : err / tol);
    ++count;
  }
  bool ok() const { return count > 0 && max_ratio <= 1; }
  void print(const char* what) const {
    std::printf("  check    %s: max rel error %.2e (%.2f of its tolerance, largest tolerance %.1e): %s\n", what,
                max_err, max_ratio, max_tol, ok() ? "PASS" : "FAIL");
  }
};

constexpr double eps_f = std::numeric_limits<float>::epsilon();

template <class Space>
std::string backend_name(const Space& space) {
  std::string s = std::string(Space::name()) + " (concurrency " + std::to_string(space.concurrency()) + ")";
#ifdef KOKKOS_ENABLE_CUDA
  if constexpr (std::is_same<Space, Kokkos::Cuda>::value) {
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, space.cuda_device());
    s += std::string(", ") + prop.name;
  }
#endif
  return s;
}

const char* gemm_backend() {
#if defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS) && defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
  return "cuBLAS TPL on CUDA, host BLAS TPL on the host";
#elif defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS)
  return "cuBLAS TPL on CUDA, Kokkos Kernels' own kernel on the host";
#elif defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
  return "host BLAS TPL";
#else
  return "Kokkos Kernels' own kernel (no BLAS TPL: slow)";
#endif
}

// ---- the workloads, on one execution space

template <class Space>
struct Runner {
  using Memory     = typename Space::memory_space;
  using Matrix     = Kokkos::View<float**, Kokkos::LayoutRight, Memory>;
  using Vector     = Kokkos::View<float*, Memory>;
  using HostMatrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
  using HostVector = Kokkos::View<float*, Kokkos::HostSpace>;
  using Host       = Kokkos::DefaultHostExecutionSpace;

  const Options& opt;
  Space space;

  static Matrix matrix(const char* label, std::int64_t r, std::int64_t c) {
    return Matrix(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), r, c);
  }

  static HostVector host_row(const Matrix& m, std::int64_t i) {
    HostVector h(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("row")), m.extent(1));
    Kokkos::deep_copy(h, Kokkos::subview(m, i, Kokkos::ALL));
    return h;
  }

  /// Largest |a - b| / max(|b|, 1e-30) over two host Views of one shape.
  static double max_relative_difference(const HostMatrix& a, const HostMatrix& b) {
    double m = 0;
    Kokkos::parallel_reduce(
        "difference",
        Kokkos::MDRangePolicy<Host, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>(
            {0, 0}, {std::int64_t(a.extent(0)), std::int64_t(a.extent(1))}),
        [=](const std::int64_t i, const std::int64_t j, double& acc) {
          const double d = std::abs(double(a(i, j)) - b(i, j)) / std::max(std::abs(double(b(i, j))), 1e-30);
          acc            = (d > acc || d != d) ? d : acc;
        },
        Kokkos::Max<double>(m));
    return m;
  }

  bool softmax() {
    const std::int64_t rows = opt.dim(opt.rows, 4096), cols = opt.dim(opt.cols, 393216);
    std::printf("softmax %lld x %lld fp32 on %s\n", (long long)rows, (long long)cols, backend_name(space).c_str());
    progress("softmax: allocating and filling x and y (%.2f GB each)", 4e-9 * rows * cols);
    const Matrix x = matrix("x", rows, cols), y = matrix("y", rows, cols);
    fill(space, x, opt.seed, 0, 1);
    Kokkos::deep_copy(space, y, 0.0f);  // first touch, outside the timing
    progress("softmax: first (checked) run");
    print_path(softfuse::softmax(space, x, y, opt.implementation));
    space.fence();

    const auto rows_checked = sample(rows, rows * cols <= (1 << 24) ? rows : opt.check_rows);
    progress("softmax: checking %zu rows against fp64", rows_checked.size());
    Check check;
    std::vector<double> xd(cols), ref(cols);
    for (const auto i : rows_checked) {
      const auto hx = host_row(x, i), hy = host_row(y, i);
      for (std::int64_t j = 0; j < cols; ++j) xd[j] = hx(j);
      softfuse_test::reference_softmax_row(xd.data(), ref.data(), cols);
      for (std::int64_t j = 0; j < cols; ++j) check.add(hy(j), ref[j], 1e-5);
    }

    progress("softmax: %d timed runs", opt.reps);
    const double t = median_seconds(space, opt.reps, [&] { softfuse::softmax(space, x, y, opt.implementation); });
    std::printf("  time     %.3f ms (median of %d)   %.1f GB/s (one read and one write of x)\n", t * 1e3, opt.reps,
                8.0 * rows * cols / t * 1e-9);
    const std::string what = std::to_string(rows_checked.size()) + " rows vs fp64";
    check.print(what.c_str());
    bool ok = check.ok();

    if (opt.cross_check) {
      progress("softmax: cross-check, the same x on %s", Host::name());
      const auto hy = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), y);
      const auto hx = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), x);
      softfuse::softmax(Host(), hx, hx);  // in place: x is not needed any more
      Host().fence();
      const double d  = max_relative_difference(hy, hx);
      const bool pass = d <= 2e-5;
      std::printf("  cross    %s vs %s: max rel difference %.2e (limit 2e-05): %s\n", Space::name(), Host::name(), d,
                  pass ? "PASS" : "FAIL");
      ok = ok && pass;
    }
    return ok;
  }

  // What the fused layers share: their inputs on the device and on the host, and the reference rows.
  struct Layer {
    std::int64_t batch, in, out;
    Matrix x, w, y;
    Vector b;
    HostMatrix hx, hw;
    HostVector hb;
  };

  /// Small fused workloads (up to 2^27 multiply-adds) are checked on every row and feature.
  static bool small(const Layer& l) { return l.batch * l.in * l.out <= (std::int64_t(1) << 27); }

  Layer make_layer(const char* name) {
    Layer l;
    l.batch = opt.dim(opt.batch, 1024), l.in = opt.dim(opt.in, 8192), l.out = opt.dim(opt.out, 8192);
    progress("%s: allocating and filling x, weight, bias (%.2f GB)", name, 4e-9 * (l.batch * l.in + l.out * l.in));
    l.x = matrix("x", l.batch, l.in), l.w = matrix("weight", l.out, l.in), l.y = matrix("y", l.batch, l.out);
    l.b                = Vector("bias", l.out);
    const double bound = 1 / std::sqrt(double(l.in));  // the reference framework's Linear init
    fill(space, l.x, opt.seed, 0, 1);
    fill(space, l.w, opt.seed + 1, -bound, bound);
    fill(space, l.b, opt.seed + 2, -bound, bound);
    Kokkos::deep_copy(space, l.y, 0.0f);
    l.hx = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), l.x);
    l.hw = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), l.w);
    l.hb = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), l.b);
    return l;
  }

  /// fp64 logits z [rows.size(), out] of the given rows and their error bounds e (bias left out of the bounds
  /// when `bias_cancels`: BatchNorm in training mode).
  static void reference_rows(const Layer& l, const std::vector<std::int64_t>& rows, bool bias_cancels,
                             std::vector<double>& z, std::vector<double>& e) {
    const std::int64_t out = l.out, in = l.in;
    z.assign(rows.size() * out, 0.0);
    e.assign(rows.size() * out, 0.0);
    Kokkos::parallel_for("reference rows", Kokkos::RangePolicy<Host>(0, rows.size()), [&](const int r) {
      std::vector<double> peak(out);
      double* zr = z.data() + r * out;
      softfuse_test::reference_linear_row(l.hx.data() + rows[r] * in, l.hw.data(), l.hb.data(), in, out, zr,
                                          peak.data());
      for (std::int64_t j = 0; j < out; ++j)
        e[r * out + j] = bias_cancels ? softfuse_test::logit_error(eps_f, in, peak[j], zr[j] - l.hb(j), 0)
                                      : softfuse_test::logit_error(eps_f, in, peak[j], zr[j], l.hb(j));
    });
    Host().fence();
  }

  /// The implementation that ran, as the library reports it.
  void print_path(softfuse::Implementation ran) const {
    std::printf("  path     %s; gemm: %s\n",
                ran == softfuse::Implementation::specialized ? "specialized (hand-tuned CUDA kernels)" : "portable",
                ran == softfuse::Implementation::specialized ? "cuBLASLt" : gemm_backend());
  }

  const char* precision_name() const {
    return opt.precision == softfuse::Precision::tf32     ? "tf32"
           : opt.precision == softfuse::Precision::tf32x3 ? "tf32x3"
                                                          : "fp32";
  }

  /// The fused layers' tolerances are the fp32 error model's times this (tests/reference): the mode runs only
  /// where the CUDA specialization takes the layer, but the portable path's fp32 is within them too.
  double error_factor() const {
    return opt.precision == softfuse::Precision::tf32     ? softfuse_test::tf32_error_factor
           : opt.precision == softfuse::Precision::tf32x3 ? softfuse_test::tf32x3_error_factor
                                                          : 1.0;
  }

  void print_times(const Layer& l, double t, double t_gemm) {
    const double flops = 2.0 * l.batch * l.in * l.out;
    std::printf(
        "  time     %.3f ms (median of %d)   %.3f TFLOP/s;  fp32 gemm alone (KokkosBlas) %.3f ms  %.3f TFLOP/s  "
        "(fused/gemm %.3f)\n",
        t * 1e3, opt.reps, flops / t * 1e-12, t_gemm * 1e3, flops / t_gemm * 1e-12, t / t_gemm);
  }

  double time_gemm(const Layer& l) {
    using namespace softfuse::Impl;
    const exec_view_t<Space, Matrix> x = l.x, w = l.w;
    const exec_view_t<Space, Matrix, false> y = l.y;
    return median_seconds(space, opt.reps, [&] { linear_gemm(space, x, w, y); });
  }

  /// Checks the device's y rows `rows` against reference rows computed by row_ref(r, y_ref, tol).
  template <class RowRef>
  static Check check_rows(const Layer& l, const std::vector<std::int64_t>& rows, RowRef&& row_ref) {
    Check check;
    std::vector<double> ref(l.out), tol;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      row_ref(r, ref.data(), tol);
      const auto hy = host_row(l.y, rows[r]);
      for (std::int64_t j = 0; j < l.out; ++j) check.add(hy(j), ref[j], tol[j]);
    }
    return check;
  }

  /// The same layer on the host, compared with the device's y.
  template <class F>
  bool cross_check(const Layer& l, const char* name, F&& host_run, double tolerance) {
    progress("%s: cross-check, the same inputs on %s", name, Host::name());
    const auto hy = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), l.y);
    const HostMatrix y_host("y_host", l.batch, l.out);
    host_run(y_host);
    Host().fence();
    const double d = max_relative_difference(hy, y_host), limit = 2 * tolerance;
    const bool pass = d <= limit;
    std::printf("  cross    %s vs %s: max rel difference %.2e (limit %.1e, twice the largest tolerance): %s\n",
                Space::name(), Host::name(), d, limit, pass ? "PASS" : "FAIL");
    return pass;
  }

  bool linear_gelu_softmax() {
    const auto gelu = opt.gelu_exact ? softfuse::Gelu::exact : softfuse::Gelu::tanh;
    Layer l         = make_layer("linear_gelu_softmax");
    std::printf("linear_gelu_softmax %lld x %lld x %lld %s, %s GELU, on %s\n", (long long)l.batch, (long long)l.in,
                (long long)l.out, precision_name(), opt.gelu_exact ? "exact" : "tanh", backend_name(space).c_str());
    const auto run = [&] {
      return softfuse::linear_gelu_softmax(space, l.x, l.w, l.b, l.y, gelu, opt.implementation, opt.precision);
    };
    progress("linear_gelu_softmax: first (checked) run");
    print_path(run());
    space.fence();

    const auto rows = sample(l.batch, small(l) ? l.batch : opt.check_rows);
    progress("linear_gelu_softmax: fp64 reference of %zu rows", rows.size());
    std::vector<double> z, e;
    reference_rows(l, rows, false, z, e);
    const Check check = check_rows(l, rows, [&](std::size_t r, double* ref, std::vector<double>& tol) {
      softfuse_test::reference_gelu_softmax_row(z.data() + r * l.out, e.data() + r * l.out, l.out, opt.gelu_exact,
                                                eps_f, ref, tol);
      for (auto& t : tol) t *= error_factor();
    });

    progress("linear_gelu_softmax: %d timed runs of the gemm alone, then of the layer", opt.reps);
    const double t_gemm = time_gemm(l);  // first: it leaves the logits in y
    const double t      = median_seconds(space, opt.reps, run);
    print_times(l, t, t_gemm);
    check.print((std::to_string(rows.size()) + " rows vs fp64").c_str());
    bool ok = check.ok();
    if (opt.cross_check)
      ok = cross_check(
               l, "linear_gelu_softmax",
               [&](const HostMatrix& y_host) { softfuse::linear_gelu_softmax(Host(), l.hx, l.hw, l.hb, y_host, gelu); },
               check.max_tol) &&
           ok;
    return ok;
  }

  bool linear_batchnorm_softmax() {
    Layer l = make_layer("linear_batchnorm_softmax");
    std::printf("linear_batchnorm_softmax %lld x %lld x %lld %s, %s, %s scale, on %s\n", (long long)l.batch,
                (long long)l.in, (long long)l.out, precision_name(), opt.training ? "training" : "inference",
                opt.vector_scale ? "per-feature" : "scalar", backend_name(space).c_str());
    const std::int64_t out = l.out;
    softfuse::BatchNorm<Vector> bn{Vector("gamma", out), Vector("beta", out), Vector("running_mean", out),
                                   Vector("running_var", out)};
    bn.mode      = opt.training ? softfuse::BatchNormMode::training : softfuse::BatchNormMode::inference;
    bn.workspace = Vector("workspace", 3 * out);  // allocated once, not per call
    const Vector scale("scale", opt.vector_scale ? out : 1);
    fill(space, bn.gamma, opt.seed + 3, 0.5, 1.5);
    fill(space, bn.beta, opt.seed + 4, -0.5, 0.5);
    fill(space, scale, opt.seed + 5, 0.5, 2.0);
    // Training: running statistics from zero, so that one step leaves momentum times the batch statistics.
    // Inference: the framework's initial running statistics (0 and 1).
    if (!opt.training) Kokkos::deep_copy(space, bn.running_var, 1.0f);
    const auto h_gamma = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), bn.gamma);
    const auto h_beta  = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), bn.beta);
    const auto h_scale = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), scale);
    const auto h_rm0 = Kokkos::create_mirror(bn.running_mean), h_rv0 = Kokkos::create_mirror(bn.running_var);
    Kokkos::deep_copy(h_rm0, bn.running_mean);
    Kokkos::deep_copy(h_rv0, bn.running_var);

    const auto run = [&] {
      return softfuse::linear_batchnorm_softmax(space, l.x, l.w, l.b, bn, scale, l.y, opt.implementation,
                                                opt.precision);
    };
    progress("linear_batchnorm_softmax: first (checked) run");
    print_path(run());
    space.fence();
    const auto h_rm = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), bn.running_mean);
    const auto h_rv = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), bn.running_var);

    std::vector<double> gamma(out), beta(out), sc(scale.extent(0));
    for (std::int64_t j = 0; j < out; ++j) gamma[j] = h_gamma(j), beta[j] = h_beta(j);
    for (std::size_t j = 0; j < sc.size(); ++j) sc[j] = h_scale(j);
    const double m = bn.momentum, n = double(l.batch);
    bool ok = true;

    // Batch statistics of the checked features over all rows, against the running statistics' update.
    Check stats_check;
    if (opt.training) {
      const auto cols = sample(out, small(l) ? out : opt.check_cols);
      progress("linear_batchnorm_softmax: fp64 statistics of %zu features over %lld rows", cols.size(),
               (long long)l.batch);
      std::vector<double> zc(l.batch * cols.size()), ec(zc.size());
      Kokkos::parallel_for("reference columns", Kokkos::RangePolicy<Host>(0, cols.size()), [&](const int c) {
        const std::int64_t j = cols[c];
        for (std::int64_t i = 0; i < l.batch; ++i) {
          double z, peak;
          softfuse_test::reference_linear_row(l.hx.data() + i * l.in, l.hw.data() + j * l.in, l.hb.data() + j, l.in, 1,
                                              &z, &peak);
          zc[i * cols.size() + c] = z;
          ec[i * cols.size() + c] = softfuse_test::logit_error(eps_f, l.in, peak, z - l.hb(j), 0);
        }
      });
      Host().fence();
      const auto s = softfuse_test::reference_batch_stats(zc, ec, l.batch, cols.size());
      for (std::size_t c = 0; c < cols.size(); ++c) {
        const std::int64_t j = cols[c];
        const double sd = std::sqrt(s.var[c]), var_u = s.var[c] * n / (n - 1);
        // running = momentum * stat, rounded to float; the statistics' own bounds as in the unit tests.
        const double tol_mean =
            error_factor() * (2 * s.err[c] + 4 * eps_f * std::abs(s.mean[c])) / std::max(std::abs(s.mean[c]), 1e-30);
        const double tol_var = error_factor() * (2 * (2 * sd * s.err[c] + s.err[c] * s.err[c]) / s.var[c] + 8 * eps_f);
        stats_check.add(h_rm(j) / m, s.mean[c], tol_mean);
        stats_check.add(h_rv(j) / m, var_u, tol_var);
      }
    }

    // Rows: fp64 logits, normalized by the statistics the device used.
    const auto rows = sample(l.batch, small(l) ? l.batch : opt.check_rows);
    progress("linear_batchnorm_softmax: fp64 reference of %zu rows", rows.size());
    std::vector<double> z, e;
    reference_rows(l, rows, opt.training, z, e);
    softfuse_test::FeatureStats stats{std::vector<double>(out), std::vector<double>(out), std::vector<double>(out)};
    for (std::int64_t j = 0; j < out; ++j) {
      if (opt.training) {
        stats.mean[j] = h_rm(j) / m;
        stats.var[j]  = h_rv(j) / m * (n - 1) / n;
        for (std::size_t r = 0; r < rows.size(); ++r) stats.err[j] = std::max(stats.err[j], e[r * out + j]);
        stats.err[j] += 2 * eps_f * (std::abs(stats.mean[j]) + std::sqrt(stats.var[j]));  // read back from float
      } else {
        stats.mean[j] = h_rm0(j), stats.var[j] = h_rv0(j);
        stats.err[j] = 2 * eps_f * std::abs(l.hb(j) - stats.mean[j]);
      }
    }
    const Check check = check_rows(l, rows, [&](std::size_t r, double* ref, std::vector<double>& tol) {
      softfuse_test::reference_batchnorm_softmax_row(z.data() + r * out, e.data() + r * out, stats, gamma.data(),
                                                     beta.data(), sc.data(), sc.size(), bn.eps, out, eps_f, ref, tol);
      for (auto& t : tol) t *= error_factor();
    });

    progress("linear_batchnorm_softmax: %d timed runs of the gemm alone, then of the layer", opt.reps);
    const double t_gemm = time_gemm(l);  // first: it leaves the logits in y
    const double t      = median_seconds(space, opt.reps, run);
    print_times(l, t, t_gemm);
    if (opt.training) {
      stats_check.print("batch statistics (running mean and var after one step) of sampled features vs fp64");
      ok = ok && stats_check.ok();
    }
    check.print((std::to_string(rows.size()) + " rows vs fp64").c_str());
    ok = ok && check.ok();

    if (opt.cross_check)
      ok = cross_check(
               l, "linear_batchnorm_softmax",
               [&](const HostMatrix& y_host) {
                 softfuse::BatchNorm<HostVector> hbn{Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), bn.gamma),
                                                     Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), bn.beta),
                                                     HostVector("running_mean", out), HostVector("running_var", out),
                                                     bn.mode};
                 Kokkos::deep_copy(hbn.running_mean, h_rm0);  // the state before the device's first step
                 Kokkos::deep_copy(hbn.running_var, h_rv0);
                 softfuse::linear_batchnorm_softmax(Host(), l.hx, l.hw, l.hb, hbn, h_scale, y_host);
               },
               check.max_tol) &&
           ok;
    return ok;
  }

  bool run(const std::string& workload) {
    if (workload == "softmax") return softmax();
    if (workload == "linear_batchnorm_softmax") return linear_batchnorm_softmax();
    return linear_gelu_softmax();
  }
};

template <class Space>
bool run_all(const Options& opt) {
  Runner<Space> runner{opt, Space()};
  bool ok = true;
  for (const auto& w : opt.workloads) {
    const bool pass = runner.run(w);
    progress("%s: %s", w.c_str(), pass ? "PASS" : "FAIL");
    ok = ok && pass;
  }
  return ok;
}

}  // namespace

#ifdef SOFTFUSE_HAVE_MPI
#include "softfuse_cli_distributed.hpp"
#endif

int main(int argc, char* argv[]) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // results and stderr progress interleave in order
  Options opt;
  try {
    opt = parse(argc, argv);
  } catch (const UsageError& e) {
    const bool help = std::string(e.what()).empty();
    if (!help) std::fprintf(stderr, "softfuse: %s\n\n", e.what());
    std::fputs(usage_text, help ? stdout : stderr);
    return help ? 0 : 2;
  }
  if (opt.distributed) {
#ifdef SOFTFUSE_HAVE_MPI
    return run_distributed(opt, argc, argv);
#else
    std::fprintf(stderr, "softfuse: --distributed needs softfuse built with -DSOFTFUSE_ENABLE_MPI=ON\n");
    return 2;
#endif
  }
  int status = 0;
  Kokkos::initialize(argc, argv);
  try {
    run_clock().reset();
    std::printf("softfuse %d.%d.%d, Kokkos %d.%d.%d, gemm: %s\n", SOFTFUSE_VERSION_MAJOR, SOFTFUSE_VERSION_MINOR,
                SOFTFUSE_VERSION_PATCH, KOKKOS_VERSION / 10000, KOKKOS_VERSION / 100 % 100, KOKKOS_VERSION % 100,
                gemm_backend());
    const bool ok =
        opt.host ? run_all<Kokkos::DefaultHostExecutionSpace>(opt) : run_all<Kokkos::DefaultExecutionSpace>(opt);
    std::printf("result: %s\n", ok ? "PASS" : "FAIL");
    status = ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "softfuse: error: %s\n", e.what());
    status = 2;
  }
  Kokkos::finalize();
  return status;
}
