#ifndef SOFTFUSE_TEST_PROPERTIES_COMMON_HPP
#define SOFTFUSE_TEST_PROPERTIES_COMMON_HPP

// What the randomized property tests of softmax and the fused layers share (Test_SoftmaxProperties.hpp,
// Test_LinearGeluSoftmaxProperties.hpp, Test_LinearBatchNormSoftmaxProperties.hpp; one file each so that their
// instantiations compile in parallel): include after a backends/Test_<Backend>.hpp that defines TestExecSpace and
// TestCategory.
//
// Each test draws cases until its time budget is spent (and at least kMinCases): shapes of 1, 2, primes
// around powers of two or anything up to a few hundred thousand elements (0 now and then); layouts
// LayoutRight, LayoutLeft and LayoutStride (padded rows with column stride 1 — a subview of a wider View —,
// 2 or 3, or padded column-major storage); in place or not; float or double; Implementation::automatic or
// portable; values from tiny to ±1e30, in one range, around a huge centre or of every magnitude in one row,
// with special values in some rows (NaN, ±inf, rows of -inf, rows of one huge value, the lowest finite value).
// Every output is compared with the double reference of tests/reference within the error-bound tolerances
// the other tests use (Test_Softmax_Common.hpp, softfuse_reference_layers.hpp), where the reference is NaN
// the output must be NaN, every row must keep the softmax invariants (all NaN, or in [0, 1] summing to 1),
// and no element outside the Views may change.
//
// Reproducible: case k draws everything from its own seed s_k, with s_0 = SOFTFUSE_TEST_SEED (default
// 20261122; "random" draws one) and s_{k+1} = splitmix64(s_k). A failure names s_k, and
// SOFTFUSE_TEST_SEED=s_k runs that case first. SOFTFUSE_TEST_BUDGET: seconds per test (default 1).

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <softfuse_linear_batchnorm_softmax.hpp>
#include <softfuse_linear_gelu_softmax.hpp>

#include "Test_LinearLayers_Common.hpp"
#include "Test_Softmax_Common.hpp"

namespace TestProperties {

using Test::Matrix;
using Test::Strides;
using TestLinearLayers::BatchNormCase;
using TestLinearLayers::BatchNormMode;
using TestLinearLayers::BatchNormReference;
using TestLinearLayers::Linear;
using Rng = std::mt19937_64;

constexpr int kMinCases = 8;

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline std::uint64_t first_seed() {
  const char* env = std::getenv("SOFTFUSE_TEST_SEED");
  if (!env || !*env) return 20261122;
  if (std::string(env) == "random") {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }
  return std::strtoull(env, nullptr, 0);
}

inline double budget_seconds() {
  const char* env = std::getenv("SOFTFUSE_TEST_BUDGET");
  return env && *env ? std::strtod(env, nullptr) : 1.0;
}

/// Runs one_case(rng, description) on successive case seeds until the budget is spent; stops at the first
/// failing case, whose seed every failure message carries.
template <class F>
void run_properties(const char* name, F&& one_case) {
  const std::uint64_t seed0 = first_seed();
  const double budget       = budget_seconds();
  const auto start          = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::uint64_t seed = seed0;
  int cases          = 0;
  double slowest     = 0;
  std::string slowest_case;
  for (; cases < kMinCases || elapsed() < budget; ++cases, seed = splitmix64(seed)) {
    std::string description;
    const double case_start = elapsed();
    {
      SCOPED_TRACE(std::string(name) + " case " + std::to_string(cases) +
                   ": SOFTFUSE_TEST_SEED=" + std::to_string(seed) + " runs it first");
      Rng rng(seed);
      one_case(rng, description);
    }
    if (elapsed() - case_start > slowest) slowest = elapsed() - case_start, slowest_case = description;
    if (::testing::Test::HasFailure()) {
      std::printf("    %s: case %d failed: %s; rerun with SOFTFUSE_TEST_SEED=%" PRIu64 "\n", name, cases,
                  description.c_str(), seed);
      break;
    }
  }
  std::printf("    %s: %d cases in %.2f s (SOFTFUSE_TEST_SEED=%" PRIu64
              ", SOFTFUSE_TEST_BUDGET=%g) on %s; slowest %.3f s: %s\n",
              name, cases, elapsed(), seed0, budget, TestExecSpace::name(), slowest, slowest_case.c_str());
}

inline double uniform(Rng& g, double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(g); }
inline bool coin(Rng& g, double p = 0.5) { return uniform(g, 0, 1) < p; }
inline std::size_t below(Rng& g, std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(g); }
inline double log_uniform(Rng& g, double lo_exp, double hi_exp) { return std::pow(10.0, uniform(g, lo_exp, hi_exp)); }

/// An extent up to max: 1, a prime (many next to powers of two), or anything.
inline std::size_t pick_extent(Rng& g, std::size_t max) {
  static const std::size_t primes[] = {2,    3,    5,     7,     13,    31,    37,     61,     67,     97,    127,
                                       131,  251,  257,   509,   521,   1021,  1031,   2039,   2053,   4093,  4099,
                                       8191, 8209, 16381, 32771, 65521, 65537, 131071, 262147, 393209, 524287};
  const double p                    = uniform(g, 0, 1);
  if (p < 0.15 || max <= 1) return 1;
  if (p < 0.6) {
    std::size_t n = 0;
    while (n < sizeof(primes) / sizeof(primes[0]) && primes[n] <= max) ++n;
    if (n > 0) return primes[below(g, n)];
  }
  return 1 + below(g, max);
}

template <class Layout>
const char* layout_name() {
  return std::is_same<Layout, Kokkos::LayoutRight>::value  ? "LayoutRight"
         : std::is_same<Layout, Kokkos::LayoutLeft>::value ? "LayoutLeft"
                                                           : "LayoutStride";
}

/// Strides for a rows x cols matrix of Layout: for LayoutStride padded rows with column stride 1 (a subview of
/// a wider View), 2 or 3, padded column-major storage, or Matrix's default ({}); nothing to choose otherwise.
template <class Layout>
Strides pick_strides(Rng& g, std::size_t rows, std::size_t cols, std::string& what) {
  if (!std::is_same<Layout, Kokkos::LayoutStride>::value) return {};
  const std::size_t pad = below(g, 17), step = 2 + below(g, 2);
  Strides s;
  switch (below(g, 4)) {
    case 0: s = {cols + pad, 1}; break;
    case 1: s = {cols * step + pad, step}; break;
    case 2: s = {1, rows + pad}; break;
    default: what += " (default strides)"; return s;
  }
  s.row = std::max<std::size_t>(s.row, 1), s.col = std::max<std::size_t>(s.col, 1);
  what += " (strides " + std::to_string(s.row) + ", " + std::to_string(s.col) + ")";
  return s;
}

/// Puts special values into some rows of v (rows x cols, row-major): NaN, +inf, -inf, +inf with -inf; for
/// softmax inputs (`softmax`) also the lowest finite value, rows of -inf, of one huge value, and of -inf but one.
/// (A layer's x gets no huge finite values: their products overflow T where the double reference does not.)
template <class T>
void add_specials(Rng& g, std::vector<T>& v, std::size_t rows, std::size_t cols, bool softmax, std::string& what) {
  if (cols == 0) return;
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const double per_row = uniform(g, 0.05, 0.5);
  std::size_t count    = 0;
  for (std::size_t i = 0; i < rows; ++i) {
    if (!coin(g, per_row)) continue;
    ++count;
    T* row              = v.data() + i * cols;
    const std::size_t j = below(g, cols);
    switch (below(g, softmax ? 8 : 4)) {
      case 0: row[j] = nan; break;
      case 1: row[j] = inf; break;
      case 2:
        for (std::size_t k = 0, n = 1 + below(g, cols); k < n; ++k) row[below(g, cols)] = -inf;
        break;
      case 3: row[j] = inf, row[below(g, cols)] = -inf; break;
      case 4: row[j] = -std::numeric_limits<T>::max(); break;
      case 5: std::fill(row, row + cols, -inf); break;
      case 6: std::fill(row, row + cols, static_cast<T>(coin(g) ? 1e30 : -1e30)); break;
      default: std::fill(row, row + cols, -inf), row[j] = static_cast<T>(uniform(g, -1e30, 1e30)); break;
    }
  }
  what += ", specials in " + std::to_string(count) + " rows";
}

/// rows x cols softmax inputs (row-major) from tiny to ±1e30.
template <class T>
std::vector<T> random_inputs(Rng& g, std::size_t rows, std::size_t cols, std::string& what) {
  std::vector<T> v(rows * cols);
  const double p = uniform(g, 0, 1);
  char buf[96];
  if (p < 0.35) {  // one range [-s, s), s from 1e-30 to 1e30
    const double s = log_uniform(g, -30, 30);
    for (auto& e : v) e = static_cast<T>(uniform(g, -s, s));
    std::snprintf(buf, sizeof buf, " values in +-%.2g", s);
  } else if (p < 0.55) {  // around a centre of any magnitude, with a relative spread from 1e-7 to 1
    const double c = (coin(g) ? 1 : -1) * log_uniform(g, -30, 30), spread = std::abs(c) * log_uniform(g, -7, 0);
    for (auto& e : v) e = static_cast<T>(c + uniform(g, -spread, spread));
    std::snprintf(buf, sizeof buf, " values %.3g +- %.2g", c, spread);
  } else if (p < 0.75) {  // every magnitude from 1e-40 (float subnormals) to 1e30 in one row
    for (auto& e : v) e = static_cast<T>((coin(g) ? 1 : -1) * log_uniform(g, -40, 30));
    std::snprintf(buf, sizeof buf, " values of every magnitude");
  } else {  // moderate: [lo, lo + w)
    const double lo = uniform(g, -50, 50), w = log_uniform(g, -3, 2.5);
    for (auto& e : v) e = static_cast<T>(uniform(g, lo, lo + w));
    std::snprintf(buf, sizeof buf, " values in [%.3g, %.3g)", lo, lo + w);
  }
  what += buf;
  if (coin(g, 0.35)) add_specials(g, v, rows, cols, true, what);
  return v;
}

// ---- softmax -------------------------------------------------------------------------------------------

template <class T, class Layout>
void softmax_case(Rng& g, std::size_t rows, std::size_t cols, std::string& what) {
  what += std::string(" ") + layout_name<Layout>();
  const Strides strides = pick_strides<Layout>(g, rows, cols, what);
  const bool in_place   = coin(g);
  const auto impl       = coin(g) ? softfuse::Implementation::automatic : softfuse::Implementation::portable;
  what += std::string(in_place ? " in place" : "") +
          (impl == softfuse::Implementation::automatic ? " automatic" : " portable");
  const auto values = random_inputs<T>(g, rows, cols, what);
  SCOPED_TRACE(what);
  Test::run_case<T, Layout>(rows, cols, values, in_place, impl, strides);
}

template <class T>
void softmax_case(Rng& g, std::string& what) {
  std::size_t rows, cols;
  if (coin(g, 0.1)) {  // long rows, few of them (wide teams on hosts, cluster and split kernels on GPUs)
    rows = 1 + below(g, 3);
    cols = std::max<std::size_t>(pick_extent(g, 400000), 4096 + below(g, 400000));
  } else if (coin(g, 0.08)) {  // rows beyond team scratch and one block's shared memory, up to 16 of them
    cols = 65536 + below(g, 2200000);
    rows = std::max<std::size_t>(1, std::min<std::size_t>(1 + below(g, 16), 4000000 / cols));
  } else {
    rows = pick_extent(g, 400), cols = pick_extent(g, 6000);
    while (rows * cols > 200000) rows = std::max<std::size_t>(1, rows / 2);
  }
  if (coin(g, 0.03)) (coin(g) ? rows : cols) = 0;
  what = std::string(sizeof(T) == 4 ? "float " : "double ") + std::to_string(rows) + "x" + std::to_string(cols);
  switch (below(g, 3)) {
    case 0: softmax_case<T, Kokkos::LayoutRight>(g, rows, cols, what); break;
    case 1: softmax_case<T, Kokkos::LayoutLeft>(g, rows, cols, what); break;
    default: softmax_case<T, Kokkos::LayoutStride>(g, rows, cols, what); break;
  }
}

// ---- fused layers ------------------------------------------------------------------------------------------

/// A random Linear layer (batch >= min_batch) whose logits are of a magnitude from 1e-30 to 10^max_exp (or of
/// order 1 to 20), with a bias from 1e-3 to 1e3 times that, and special values in some rows of x.
/// A given `shape` (batch x out, nonzero) keeps its batch and out and takes a small in.
template <class T>
Linear<T> random_linear(Rng& g, std::size_t min_batch, double max_exp, std::string& what,
                        std::pair<std::size_t, std::size_t> shape = {0, 0}) {
  std::size_t batch = std::max(min_batch, pick_extent(g, 300)), in = coin(g, 0.03) ? 0 : pick_extent(g, 400),
              out      = pick_extent(g, 400);
  const bool long_rows = !shape.first && coin(g, 0.08);
  if (long_rows) {  // rows beyond team scratch and one block's shared memory
    out   = 65536 + below(g, 200000);
    batch = std::max<std::size_t>(min_batch, 1 + below(g, 6)), in = 1 + below(g, 3);
  }
  if (shape.first) batch = std::max(min_batch, shape.first), out = shape.second, in = 1 + below(g, 8);
  while (!shape.first && (batch * in * out > 3000000 || batch * out > (long_rows ? 1600000u : 100000u))) {
    if (in > 1)
      in /= 2;
    else if (batch > min_batch && batch > 1)
      batch = std::max(min_batch, batch / 2);
    else
      out = std::max<std::size_t>(1, out / 2);
  }
  const double logits  = coin(g, 0.4) ? log_uniform(g, -30, max_exp) : uniform(g, 1, 20);
  const double x_scale = std::sqrt(logits) * log_uniform(g, -3, 3);
  const double w_bound = logits / x_scale / std::sqrt(static_cast<double>(std::max<std::size_t>(in, 1)));
  const double bias    = logits * log_uniform(g, -3, 3);
  const TestLinearLayers::Range x_range =
      coin(g) ? TestLinearLayers::Range{0, x_scale} : TestLinearLayers::Range{-x_scale, x_scale};
  Linear<T> lin(batch, in, out, g(), x_range, w_bound, {-bias, bias});
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %zux%zux%zu, logits ~%.2g, x in [%.2g, %.2g), |w| < %.2g, |b| < %.2g",
                sizeof(T) == 4 ? "float" : "double", batch, in, out, logits, x_range.lo, x_range.hi, w_bound, bias);
  what = buf;
  if (coin(g, 0.25)) add_specials(g, lin.x, batch, in, false, what);
  return lin;
}

/// x, weight and y of a layer as Matrices of Layout (random strides for LayoutStride), uploaded.
template <class T, class Layout>
struct LayerViews {
  Matrix<T, Layout> x, w, y;
  std::vector<T> x_image, w_image;
  static constexpr T sentinel = T(-777);

  LayerViews(Rng& g, const Linear<T>& lin, std::string& what)
      : x(lin.batch, lin.in, pick_strides<Layout>(g, lin.batch, lin.in, what)),
        w(lin.out, lin.in, pick_strides<Layout>(g, lin.out, lin.in, what)),
        y(lin.batch, lin.out, pick_strides<Layout>(g, lin.batch, lin.out, what)) {
    x_image = x.image(lin.x, sentinel), w_image = w.image(lin.w, sentinel);
    x.upload(x_image), w.upload(w_image);
    y.upload(y.image(std::vector<T>(lin.batch * lin.out, sentinel), sentinel));
  }

  /// y's values (row-major); checks that nothing else changed: x, weight, and y outside the matrix.
  std::vector<T> result(const std::string& what) const {
    const auto y_image = y.download();
    const auto out     = y.values(y_image);
    EXPECT_EQ(Test::count_changed(y_image, y.image(out, sentinel)), 0u) << what << ": y changed outside the matrix";
    EXPECT_EQ(Test::count_changed(x.download(), x_image), 0u) << what << ": x changed";
    EXPECT_EQ(Test::count_changed(w.download(), w_image), 0u) << what << ": weight changed";
    return out;
  }
};

/// y against its reference and tolerances, and every row against the softmax invariants.
template <class T>
void expect_layer_output(const std::vector<T>& y, const std::vector<double>& ref, const std::vector<double>& tol,
                         std::size_t rows, std::size_t cols, const std::string& what) {
  TestLinearLayers::expect_close(y, ref, tol, cols, what, false);
  std::size_t broken_rows = 0;
  for (std::size_t i = 0; i < rows; ++i) {
    const std::string broken =
        softfuse_test::softmax_row_invariants(y.data() + i * cols, cols, Test::Tolerance<T>::sum);
    if (!broken.empty() && broken_rows++ < 5) ADD_FAILURE() << what << ": row " << i << ": " << broken;
  }
}

inline softfuse::Implementation pick_implementation(Rng& g, std::string& what) {
  const bool automatic = coin(g);
  what += automatic ? " automatic" : " portable";
  return automatic ? softfuse::Implementation::automatic : softfuse::Implementation::portable;
}

using Shape = std::pair<std::size_t, std::size_t>;

/// One case of Layer on random float or double Views of a random layout (of the given batch x out, if any).
template <class Layer>
void layer_case(Rng& g, std::string& what, Shape shape = {0, 0}) {
  const bool single = coin(g);
  switch (below(g, 3)) {
    case 0:
      single ? Layer::template run<float, Kokkos::LayoutRight>(g, what, shape)
             : Layer::template run<double, Kokkos::LayoutRight>(g, what, shape);
      break;
    case 1:
      single ? Layer::template run<float, Kokkos::LayoutLeft>(g, what, shape)
             : Layer::template run<double, Kokkos::LayoutLeft>(g, what, shape);
      break;
    default:
      single ? Layer::template run<float, Kokkos::LayoutStride>(g, what, shape)
             : Layer::template run<double, Kokkos::LayoutStride>(g, what, shape);
      break;
  }
}

// ---- the portable row kernel's regimes ----------------------------------------------------------------------

/// The arguments n in [lo, hi] where key(n) differs from key(n - 1): bisection between powers of two (plans
/// change monotonically along rows and along columns between their switch points).
template <class Key>
std::vector<std::size_t> switch_points(std::size_t lo, std::size_t hi, const Key& key) {
  std::vector<std::size_t> points;
  for (std::size_t a = lo; a < hi;) {
    std::size_t b = std::min(hi, 2 * a);
    if (key(a) != key(b)) {
      std::size_t l = a, h = b;  // key(l) == key(a) != key(h)
      while (h - l > 1) {
        const std::size_t m        = l + (h - l) / 2;
        (key(m) == key(a) ? l : h) = m;
      }
      points.push_back(h);
      b = h;
    }
    a = b;
  }
  return points;
}

/// A shape at a switch point of the portable row kernel's plan (regime, team shape, caching) on this backend,
/// or at the last chunk of a split row: rows 1, 2, 31, 33 or around a switch along rows; columns a switch
/// point along columns, -1, +0 or +1. At most max_elements elements.
template <class T>
Shape regime_shape(Rng& g, bool cache, std::size_t max_elements, std::string& what) {
  using namespace softfuse::Impl;
  const TestExecSpace space;
  const auto bytes = [](std::int64_t n) { return row_cache_t<TestExecSpace, T>::shmem_size(n); };
  const auto plan  = [&](std::size_t rows, std::size_t cols) {
    return plan_rows(space, rows, cols, sizeof(T), cache, bytes);
  };
  const auto key = [](const RowPlan& p) {
    return std::make_tuple(int(p.regime), p.vector_length, p.team_size, p.cached, p.staged, p.staged_loads);
  };
  std::vector<std::size_t> row_choices = {1, 2, 31, 33};
  const std::size_t probe_cols         = coin(g) ? 64 : 4096;
  for (std::size_t r : switch_points(1, 1 << 16, [&](std::size_t n) { return key(plan(n, probe_cols)); }))
    for (std::size_t d : {r - 1, r, r + 1}) row_choices.push_back(d);
  const std::size_t rows = row_choices[below(g, row_choices.size())];
  auto cols_choices      = switch_points(1, std::max<std::size_t>(2, max_elements / rows),
                                         [&](std::size_t n) { return key(plan(rows, n)); });
  std::size_t cols;
  if (cols_choices.empty() || coin(g, 0.25)) {  // the last chunk of a split row holds one element
    cols            = std::max<std::size_t>(1, max_elements / rows / (1 + below(g, 8)));
    const RowPlan p = plan(rows, cols);
    if ((p.regime == RowRegime::chunked || p.regime == RowRegime::split) && p.chunks > 1)
      cols = static_cast<std::size_t>(p.chunk * (p.chunks - 1) + 1);
  } else {
    cols = cols_choices[below(g, cols_choices.size())] + below(g, 3) - 1;
  }
  cols                  = std::max<std::size_t>(1, std::min(cols, max_elements / rows));
  const RowPlan p       = plan(rows, cols);
  const char* regimes[] = {"packed", "team", "chunked", "split"};
  char buf[160];
  std::snprintf(buf, sizeof buf, " [%s regime, team %d, lanes %d%s%s, %lld chunks]", regimes[int(p.regime)],
                p.team_size, p.vector_length, p.cached ? ", cached" : "",
                p.staged ? (p.staged_loads == 16 ? ", staged 16" : ", staged") : "", static_cast<long long>(p.chunks));
  what = buf;
  return {rows, cols};
}

/// The fused layers' row pass holds rows in team scratch wherever they fit: their switch points are those of
/// cached rows (float's; double's fall at half the columns, also drawn now and then).
template <class Layer>
void layer_regime_case(Rng& g, std::string& what) {
  std::string regime;
  const Shape s =
      coin(g) ? regime_shape<float>(g, true, 1 << 19, regime) : regime_shape<double>(g, true, 1 << 19, regime);
  layer_case<Layer>(g, what, s);
  what += regime;
}

}  // namespace TestProperties

#endif
