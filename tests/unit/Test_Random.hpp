#ifndef SOFTFUSE_TEST_RANDOM_HPP
#define SOFTFUSE_TEST_RANDOM_HPP

// Seeded random inputs shared by the tests: n values of T uniform in [lo, hi).

#include <cstdint>
#include <random>
#include <vector>

namespace softfuse_test {

template <class T>
std::vector<T> random_values(std::size_t n, double lo, double hi, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(n);
  for (auto& e : v) e = static_cast<T>(dist(gen));
  return v;
}

}  // namespace softfuse_test

#endif
