// softfuse::TeamSoftmax inside a kernel of your own. Each team of a TeamPolicy takes one row of scores,
// turns it into probabilities softmax(x / temperature) (the temperature passed as the elementwise op, the row
// held in team scratch so x is read once), and goes on using them in the same kernel: here, the entropy of
// each row. Checked against plain host math; exits non-zero on a mismatch.

#include <Kokkos_Core.hpp>
#include <softfuse.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

KOKKOS_INLINE_FUNCTION float log_of(const float v) {
#if KOKKOS_VERSION >= 30700  // Kokkos 3.7 moved the math functions out of Kokkos::Experimental
  return Kokkos::log(v);
#else
  return Kokkos::Experimental::log(v);
#endif
}

struct Temperature {
  float inverse;
  KOKKOS_INLINE_FUNCTION float operator()(const std::int64_t /*j*/, const float x) const { return x * inverse; }
};

}  // namespace

int main(int argc, char* argv[]) {
  int failures = 0;
  Kokkos::initialize(argc, argv);
  {
    using Space       = Kokkos::DefaultExecutionSpace;
    using policy_type = Kokkos::TeamPolicy<Space>;
    using member_type = policy_type::member_type;
    using scratch_row = Kokkos::View<float*, Space::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
    const int rows = 300, cols = 1000;
    const float temperature = 0.7f;

    Kokkos::View<float**, Kokkos::LayoutRight, Space> x("x", rows, cols), p("p", rows, cols);
    Kokkos::View<float*, Space> entropy("entropy", rows);
    auto hx = Kokkos::create_mirror_view(x);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) hx(i, j) = static_cast<float>(std::sin(0.37 * i + 0.011 * j * j) * (1 + i % 5));
    Kokkos::deep_copy(x, hx);

    const Temperature op{1 / temperature};
    policy_type policy(rows, Kokkos::AUTO);
    policy.set_scratch_size(0, Kokkos::PerTeam(scratch_row::shmem_size(cols)));
    Kokkos::parallel_for(
        "user kernel", policy, KOKKOS_LAMBDA(const member_type& team) {
          const int i      = team.league_rank();
          const auto x_row = Kokkos::subview(x, i, Kokkos::ALL);
          const auto p_row = Kokkos::subview(p, i, Kokkos::ALL);
          softfuse::TeamSoftmax::invoke(team, x_row, p_row, scratch_row(team.team_scratch(0), cols), op);
          team.team_barrier();  // each thread wrote its own part of p_row; all of it is read below
          float h = 0;
          Kokkos::parallel_reduce(
              Kokkos::TeamThreadRange(team, cols),
              [&](const int j, float& acc) { acc -= p_row(j) > 0 ? p_row(j) * log_of(p_row(j)) : 0.0f; }, h);
          Kokkos::single(Kokkos::PerTeam(team), [&] { entropy(i) = h; });
        });

    auto hp      = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p);
    auto he      = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), entropy);
    double worst = 0;
    std::vector<double> ref(cols);
    for (int i = 0; i < rows; ++i) {
      double m = -INFINITY, s = 0, h = 0;
      for (int j = 0; j < cols; ++j) m = std::fmax(m, hx(i, j) / temperature);
      for (int j = 0; j < cols; ++j) s += ref[j] = std::exp(hx(i, j) / temperature - m);
      for (int j = 0; j < cols; ++j) {
        ref[j] /= s;
        h -= ref[j] > 0 ? ref[j] * std::log(ref[j]) : 0;
        const double err = std::abs(hp(i, j) - ref[j]) / ref[j];
        worst            = std::fmax(worst, err);
        if (!(err <= 1e-5)) ++failures;
      }
      if (!(std::abs(he(i) - h) <= 1e-4 * std::fmax(1.0, h))) ++failures;
    }
    std::printf("team_softmax_example: %d rows x %d on %s, max relative error %.2e, %d mismatches\n", rows, cols,
                Space::name(), worst, failures);
  }
  Kokkos::finalize();
  return failures == 0 ? 0 : 1;
}
