#ifndef SOFTFUSE_TEST_HOST_ROW_PASS_HPP
#define SOFTFUSE_TEST_HOST_ROW_PASS_HPP

// The host row pass's streaming stores (softfuse_host_stream_store.hpp), which the property tests' sizes do
// not reach (they stream only beyond the last-level cache): the stored products at every alignment and
// length, nothing written outside y; and the softmax of buffered, streamed rows, against the fp64 reference.
// Host backends only; include after backends/Test_<Backend>.hpp.

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <softfuse_softmax.hpp>

#include "Test_Softmax_Common.hpp"

namespace TestHostRowPass {

template <class T>
void test_scaled_store() {
  std::mt19937_64 g(7);
  std::uniform_real_distribution<double> u(-2, 2);
  constexpr std::size_t guard = 32;
  std::vector<T> v(1100);
  for (auto& e : v) e = static_cast<T>(u(g));
  const T s = static_cast<T>(0.7310585786300049);
  for (std::size_t offset = 0; offset < 17; ++offset) {
    for (std::int64_t n : {0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 129, 1000, 1099}) {
      for (bool stream : {true, false}) {
        std::vector<T> y(guard + offset + n + guard, T(-7));
        softfuse::Impl::host_scaled_store(y.data() + guard + offset, v.data(), n, s, stream);
        softfuse::Impl::host_stream_fence();
        std::size_t bad = 0;
        for (std::size_t k = 0; k < y.size(); ++k) {
          const std::int64_t j = static_cast<std::int64_t>(k) - static_cast<std::int64_t>(guard + offset);
          const T expected     = j >= 0 && j < n ? v[j] * s : T(-7);
          if (std::memcmp(&y[k], &expected, sizeof(T)) != 0) ++bad;
        }
        EXPECT_EQ(bad, 0u) << "offset " << offset << ", n " << n << (stream ? ", streamed" : ", plain");
      }
    }
  }
}

TEST_F(TestCategory, host_scaled_store_float) { test_scaled_store<float>(); }
TEST_F(TestCategory, host_scaled_store_double) { test_scaled_store<double>(); }

/// rows x cols in the host packed regime, each row buffered in its thread's scratch and written with streaming
/// stores, `block` rows per thread at a time, in place or not.
template <class T>
void streamed_softmax_case(std::size_t rows, std::size_t cols, std::int64_t block, bool in_place) {
  using namespace softfuse::Impl;
  RowPlan plan;
  plan.chunk             = static_cast<std::int64_t>(cols);
  plan.group_rows        = block;
  plan.stream            = true;
  const std::string what = std::to_string(rows) + "x" + std::to_string(cols) + ", blocks of " +
                           std::to_string(block) + (in_place ? ", in place" : "");
  std::mt19937_64 g(rows * 1000003 + cols);
  std::uniform_real_distribution<double> u(-30, 30);
  std::vector<T> xs(rows * cols);
  for (auto& e : xs) e = static_cast<T>(u(g));
  // a column window of a wider View: rows start off the vector alignment
  Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::HostSpace> wide_x("x", rows, cols + 3), wide_y("y", rows, cols + 3);
  const auto x = Kokkos::subview(wide_x, Kokkos::ALL, Kokkos::make_pair(std::size_t(1), cols + 1));
  const auto y = in_place ? x : Kokkos::subview(wide_y, Kokkos::ALL, Kokkos::make_pair(std::size_t(1), cols + 1));
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) x(i, j) = xs[i * cols + j];
  const TestExecSpace space;
  run_row_plan(space, x, y, IdentityOp(), plan, "test::streamed");
  space.fence();
  std::vector<T> ys(rows * cols);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) ys[i * cols + j] = y(i, j);
  Test::expect_matches_reference(xs, ys, rows, cols, what);
  const auto& wide = in_place ? wide_x : wide_y;
  for (std::size_t i = 0; i < rows; ++i) {  // the window's neighbours stay
    EXPECT_EQ(wide(i, 0), T(0)) << what;
    EXPECT_EQ(wide(i, cols + 2), T(0)) << what;
  }
}

template <class T>
void test_streamed_softmax() {
  const std::size_t long_row = softfuse::Impl::kHostMaxChunks * softfuse::Impl::kHostChunkBytes / sizeof(T) + 5;
  for (bool in_place : {false, true}) {
    for (std::int64_t block : {1, 3}) {
      streamed_softmax_case<T>(5, 1, block, in_place);
      streamed_softmax_case<T>(37, 1000, block, in_place);
      streamed_softmax_case<T>(1, 77, block, in_place);
      streamed_softmax_case<T>(4, long_row, block, in_place);  // more than kHostMaxChunks chunks of 8 KiB
    }
  }
}

TEST_F(TestCategory, host_streamed_softmax_float) { test_streamed_softmax<float>(); }
TEST_F(TestCategory, host_streamed_softmax_double) { test_streamed_softmax<double>(); }

}  // namespace TestHostRowPass

#endif
