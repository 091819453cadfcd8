// Times the portable softmax under every candidate plan of each shape (regime, team shape, chunk size), next to
// plan_rows' own choice and the device copy of the same buffers: the measurements behind the tunables of
// core/src/impl/softfuse_team_config.hpp. Each plan's result is checked (every row sums to 1 within 1e-4).
//
//   softfuse_bench_portable_plans [--shapes=4096x393216,65536x1024] [--reps=N] [--json=FILE] [--plans=chosen]
//
// --plans=chosen times plan_rows' own plan only (e.g. under a profiler).
// Default shapes: the 14 fp32 shapes of softmax_bench (GPUs) or its 3 host shapes (host CPUs). Medians of N fenced
// runs (default 15) after a warm-up.

#include <Kokkos_Core.hpp>
#include <Kokkos_Random.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <impl/softfuse_softmax_portable.hpp>

#include "bench_context.hpp"

namespace {

using Space  = Kokkos::DefaultExecutionSpace;
using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Space>;
using softfuse::Impl::RowPlan;
using softfuse::Impl::RowRegime;

std::size_t scratch_bytes(std::int64_t n) { return softfuse::Impl::row_cache_t<Space, float>::shmem_size(n); }

std::string describe(const RowPlan& p) {
  const char* regimes[] = {"packed", "team", "chunked", "split"};
  char detail[48]       = "";
  if (p.staged && p.staged_runs)
    std::snprintf(detail, sizeof detail, " staged runs=%d loads=%d", p.staged_run_loads, p.staged_loads);
  else if (p.staged)
    std::snprintf(detail, sizeof detail, " staged loads=%d", p.staged_loads);
  if (p.rolling > 0) std::snprintf(detail, sizeof detail, " rolling=%lld", static_cast<long long>(p.rolling));
  char buf[192];
  std::snprintf(buf, sizeof buf, "%s team=%d lanes=%d%s%s%s chunk=%lld chunks=%lld held=%lld group=%lld",
                regimes[int(p.regime)], p.team_size, p.vector_length, p.cached ? " cached" : "",
                p.stream ? " stream" : "", detail, static_cast<long long>(p.chunk), static_cast<long long>(p.chunks),
                static_cast<long long>(p.cached_chunk), static_cast<long long>(p.group_rows));
  return buf;
}

/// The candidate plans for rows x cols on host CPUs: one thread per row, with y as the row's buffer or with
/// a buffer of the row in the thread's scratch (where Kokkos allows it), written with plain or streaming stores,
/// blocks of 1 row or of 256 KiB of rows per thread at a time; split.
void host_candidates(std::int64_t rows, std::int64_t cols, std::vector<RowPlan>& plans) {
  using namespace softfuse::Impl;
  const Space space;
  const std::int64_t concurrency = space.concurrency();
  const std::size_t scratch_max  = Kokkos::TeamPolicy<Space>(space, 1, 1).scratch_size_max(1);
  const std::int64_t block       = std::max<std::int64_t>(1, std::int64_t(kHostBlockBytes / sizeof(float)) / cols);
  for (std::int64_t group : {std::int64_t(1), block}) {
    RowPlan p;
    p.group_rows = group;
    plans.push_back(p);  // chunk 0: y is the buffer
    if (cols * sizeof(float) <= scratch_max)
      for (bool stream : {false, true}) {
        p.chunk  = cols;
        p.stream = stream;
        plans.push_back(p);
      }
    if (block == 1) break;
  }
  plans.push_back(plan_split(rows, cols, 1, 2 * row_block_size<Space, true, true>(),
                             concurrency * static_cast<std::int64_t>(kHostGroupBytesPerThread / sizeof(float)),
                             concurrency));
}

/// The candidate plans for rows x cols, plan_rows' own first.
std::vector<RowPlan> candidates(std::int64_t rows, std::int64_t cols) {
  using namespace softfuse::Impl;
  const Space space;
  const std::size_t scratch_max  = Kokkos::TeamPolicy<Space>(space, 1, 1).scratch_size_max(0);
  const std::int64_t concurrency = space.concurrency();
  std::vector<RowPlan> plans     = {plan_rows(space, rows, cols, sizeof(float), true, scratch_bytes)};
  if (is_host_space<Space>()) {
    host_candidates(rows, cols, plans);
    return plans;
  }
  if (cols <= 256)
    for (int threads : {64, 128, 256})
      for (int loads : {8, 16})
        for (bool runs : {true, false}) {
          RowPlan p;
          p.regime           = RowRegime::packed;
          p.staged           = true;
          p.staged_runs      = runs;
          p.staged_run_loads = loads;
          p.staged_loads     = loads;
          p.cached           = true;
          p.team_size        = threads;
          if (scratch_bytes(staged_scratch(threads, cols)) <= scratch_max) plans.push_back(p);
        }
  if (cols <= 4096)
    for (int lanes = 1; lanes <= 32; lanes *= 2)
      for (int threads : {64, 128, 256})
        for (bool cached : {false, true}) {
          RowPlan p;
          p.regime        = RowRegime::packed;
          p.vector_length = lanes;
          p.team_size     = std::max(1, threads / lanes);
          p.cached        = cached;
          if (!cached || scratch_bytes(p.team_size * cols) <= scratch_max) plans.push_back(p);
        }
  if (scratch_bytes(cols) <= scratch_max)
    for (int team : {64, 128, 256, 512, 1024}) {
      RowPlan p;
      p.regime    = RowRegime::team;
      p.team_size = team;
      p.cached    = true;
      plans.push_back(p);
      // rows of which team scratch holds one per multiprocessor: also on persistent (rolling) teams
      if (team == kGpuHeldRowThreads && 2 * scratch_bytes(cols) > scratch_max) {
        p.rolling = gpu_multiprocessors(concurrency);
        plans.push_back(p);
      }
    }
  const std::int64_t max_chunks = gpu_multiprocessors(concurrency);
  // chunked teams are kGpuRowThreads (the kernel's launch bounds); beside the regime's chunks (at most
  // kGpuChunkBytes held), chunks of half that (four teams of 64 registers per multiprocessor where scratch holds
  // them), and chunks held in all of team scratch (one team per multiprocessor) for rows that span every
  // multiprocessor, whose chunks the regime's would hold less than half of
  const std::int64_t held     = chunk_held_elements(scratch_max, sizeof(float), scratch_bytes);
  const std::int64_t held_all = scratch_elements(scratch_max, sizeof(float), kGpuRowThreads, scratch_bytes);
  const std::int64_t held_half =
      scratch_elements(std::min(scratch_max, kGpuChunkBytes / 2), sizeof(float), kGpuRowThreads, scratch_bytes);
  if (cols >= 2048)
    for (std::int64_t h : {std::int64_t(2048), std::int64_t(4096), held_half, held, held_all})
      if (h <= held || cols >= max_chunks * 2 * held)
        plans.push_back(
            plan_chunked(rows, cols, kGpuRowThreads, kGpuRowThreads, h, concurrency / kGpuRowThreads, max_chunks));
  if (cols >= 131072)
    for (int waves : {2, 4, 8})
      for (std::int64_t group_bytes : {48, 96, 192})
        plans.push_back(plan_split(rows, cols, kGpuRowThreads, 2 * kGpuRowThreads * row_block_size<Space, true, true>(),
                                   concurrency * group_bytes / std::int64_t(sizeof(float)),
                                   waves * concurrency / kGpuRowThreads));
  // all rows in one group: two launches in all, the second pass reading from memory (the CUDA split regime's
  // rule for rows too long to group in L2, docs/softmax_regimes.md)
  if (cols >= 131072)
    for (int waves : {2, 8, 32})
      plans.push_back(plan_split(rows, cols, kGpuRowThreads, 2 * kGpuRowThreads * row_block_size<Space, true, true>(),
                                 rows * cols, waves * concurrency / kGpuRowThreads));
  return plans;
}

/// The largest |row sum - 1| over all rows: per row, blocks of 4096 columns summed by one thread each and
/// added atomically in double. No team reduction: a check through one team reduction per row (a TeamPolicy
/// parallel_reduce of AUTO team size, Kokkos 3.4, CUDA) reported row sums off by 0.001-0.036 on 2097152 x 64
/// for results this check and the unit tests find right (perf/results/h100/portable_plans_check.json).
double worst_row_sum_error(const Matrix& y) {
  const std::int64_t rows = y.extent(0), cols = y.extent(1), block = 4096;
  const std::int64_t blocks = (cols + block - 1) / block;
  Kokkos::View<double*, Space> sums("row_sums", rows);
  Kokkos::parallel_for(
      "row_sum_blocks", Kokkos::RangePolicy<Space, Kokkos::IndexType<std::int64_t>>(0, rows * blocks),
      KOKKOS_LAMBDA(const std::int64_t k) {
        const std::int64_t i = k / blocks, j0 = (k - i * blocks) * block;
        const std::int64_t j1 = j0 + block < cols ? j0 + block : cols;
        double s              = 0;
        for (std::int64_t j = j0; j < j1; ++j) s += y(i, j);
        Kokkos::atomic_add(&sums(i), s);
      });
  double worst = 0;
  Kokkos::parallel_reduce(
      "row_sum_check", Kokkos::RangePolicy<Space, Kokkos::IndexType<std::int64_t>>(0, rows),
      KOKKOS_LAMBDA(const std::int64_t i, double& w) {
        const double sum = sums(i);
        const double e   = sum == sum ? (sum > 1 ? sum - 1 : 1 - sum) : 1e30;
        w                = e > w ? e : w;
      },
      Kokkos::Max<double>(worst));
  return worst;
}

std::string take_flag(int& argc, char** argv, const std::string& name) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind(name + "=", 0) != 0) continue;
    for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
    --argc;
    return a.substr(name.size() + 1);
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::initialize(argc, argv);
  {
    const std::string reps_flag = take_flag(argc, argv, "--reps"), json_path = take_flag(argc, argv, "--json");
    const int reps         = reps_flag.empty() ? 15 : std::stoi(reps_flag);
    const bool chosen_only = take_flag(argc, argv, "--plans") == "chosen";
    std::vector<std::pair<std::int64_t, std::int64_t>> shapes;
    for (const auto& d : softfuse_bench::take_shapes_flag(argc, argv)) shapes.emplace_back(d.at(0), d.at(1));
    if (shapes.empty() && softfuse::Impl::is_host_space<Space>())
      shapes = {{4096, 65536}, {65536, 1024}, {64, 1048576}};
    if (shapes.empty())
      shapes = {{4096, 393216}, {65536, 1024}, {32768, 8192},  {8192, 32768}, {1024, 8192},
                {128, 1048576}, {16384, 4096}, {2048, 131072}, {512, 524288}, {256, 2097152},
                {32, 8388608},  {1, 33554432}, {4194304, 32},  {100000, 1000}};
    std::FILE* json = json_path.empty() ? nullptr : std::fopen(json_path.c_str(), "w");
    if (json)
      std::fprintf(json,
                   "{\"device\": \"%s\", \"execution_space\": \"%s\", \"concurrency\": %d, \"kokkos_version\": %d,\n"
                   " \"plans\": [\n",
                   softfuse_bench::device_name().c_str(), Space::name(), Space().concurrency(), KOKKOS_VERSION);
    bool first_record = true;
    const Space space;
    for (const auto& s : shapes) {
      Matrix x(Kokkos::view_alloc(Kokkos::WithoutInitializing, "x"), s.first, s.second);
      Matrix y(Kokkos::view_alloc(Kokkos::WithoutInitializing, "y"), s.first, s.second);
      Kokkos::Random_XorShift64_Pool<Space> pool(12345);
      Kokkos::fill_random(x, pool, 1.0f);
      const double copy_s = softfuse_bench::warm_median_seconds(space, reps, [&] { Kokkos::deep_copy(space, y, x); });
      auto plans          = candidates(s.first, s.second);
      if (chosen_only) plans.resize(1);
      for (std::size_t k = 0; k < plans.size(); ++k) {
        const auto run = [&] {
          softfuse::Impl::run_row_plan(space, x, y, softfuse::Impl::IdentityOp(), plans[k], "softfuse::plan_sweep");
        };
        const double t         = softfuse_bench::warm_median_seconds(space, reps, run);
        const double error     = worst_row_sum_error(y);
        const std::string what = describe(plans[k]);
        std::printf("%lldx%lld %-70s %9.4f ms %5.1f %% of copy%s%s\n", static_cast<long long>(s.first),
                    static_cast<long long>(s.second), what.c_str(), t * 1e3, 100 * copy_s / t,
                    k == 0 ? "  [plan_rows]" : "", error < 1e-4 ? "" : "  WRONG");
        std::fflush(stdout);
        if (json)
          std::fprintf(json,
                       "%s  {\"shape\": \"%lldx%lld\", \"plan\": \"%s\", \"chosen\": %s, \"median_ms\": %.5f, "
                       "\"copy_ms\": %.5f, \"of_copy\": %.4f, \"row_sum_error\": %.3g}",
                       first_record ? "" : ",\n", static_cast<long long>(s.first), static_cast<long long>(s.second),
                       what.c_str(), k == 0 ? "true" : "false", t * 1e3, copy_s * 1e3, copy_s / t, error);
        first_record = false;
      }
    }
    if (json) {
      std::fprintf(json, "\n ]}\n");
      std::fclose(json);
    }
  }
  Kokkos::finalize();
  return 0;
}
