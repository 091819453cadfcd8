#ifndef SOFTFUSE_TEST_SOFTMAX_COMMON_HPP
#define SOFTFUSE_TEST_SOFTMAX_COMMON_HPP

// What the softmax tests share: matrices of every layout inside a guarded allocation, random inputs,
// and the comparison with the double-precision reference. Include after backends/Test_<Backend>.hpp.

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

#include <softfuse_softmax.hpp>

#include "Test_Random.hpp"
#include "softfuse_reference.hpp"

namespace Test {

using memory_space = typename TestExecSpace::memory_space;

// Softmax against the fp64 reference of the same inputs. Per element, relative where the reference
// is >= 1e-30 (absolute 1e-37 below): such an output has |x - max| < 69, so rounding x - max in T
// costs at most half an ulp of 64, 2^-18 = 3.8e-6 for float (2^-47 for double), twice that on the host
// row pass and in rows held on GPUs (x - its chunk's maximum or its worker's shift, then that - the row's);
// exp adds about 2 ulp (twice there) and the normalization two or three roundings, the sum being accumulated in
// double. Row sums: y is divided by the sum of the very exponentials it is made of, so it sums to 1 within a few
// roundings.
template <class T>
struct Tolerance;
template <>
struct Tolerance<float> {
  static constexpr double rel = 1e-5;  // per element, where the reference is >= 1e-30
  static constexpr double sum = 1e-5;  // |row sum - 1|
};
template <>
struct Tolerance<double> {
  static constexpr double rel = 1e-10;
  static constexpr double sum = 1e-10;
};

/// The strides (between rows, between columns) of a LayoutStride Matrix; {0, 0}: the default. `first`: where
/// element (0, 0) lies in the allocation (a column window of a wider View starts off its allocation's alignment).
struct Strides {
  std::size_t row = 0, col = 0, first = 0;
};

// A rows x cols matrix living inside a larger 1-D allocation, seen through a View of `Layout`.
// LayoutStride gets the given strides, by default padded rows and a column stride of 2, so every
// layout has bytes that must stay.
template <class T, class Layout>
struct Matrix {
  std::size_t rows, cols, s0, s1, first;
  Kokkos::View<T*, memory_space> base;

  Matrix(std::size_t r, std::size_t c, Strides strides = {}) : rows(r), cols(c), first(strides.first) {
    if (std::is_same<Layout, Kokkos::LayoutRight>::value) {
      s0 = c, s1 = 1;
    } else if (std::is_same<Layout, Kokkos::LayoutLeft>::value) {
      s0 = 1, s1 = r;
    } else if (strides.row != 0 || strides.col != 0) {
      s0 = strides.row, s1 = strides.col;
    } else {
      s0 = 2 * c + 1, s1 = 2;
    }
    const std::size_t span = first + (r == 0 || c == 0 ? 1 : (r - 1) * s0 + (c - 1) * s1 + 1);
    base = Kokkos::View<T*, memory_space>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "base"), span + 1);
  }
  std::size_t offset(std::size_t i, std::size_t j) const { return first + i * s0 + j * s1; }

  Kokkos::View<T**, Layout, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>> view() const {
    using V = Kokkos::View<T**, Layout, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
    if constexpr (std::is_same<Layout, Kokkos::LayoutStride>::value) {
      return V(base.data() + first, Kokkos::LayoutStride(rows, s0, cols, s1));
    } else {
      return V(base.data() + first, rows, cols);
    }
  }

  // Host image of the allocation: `fill` everywhere, values (row-major rows x cols) at the matrix.
  std::vector<T> image(const std::vector<T>& values, T fill) const {
    std::vector<T> img(base.extent(0), fill);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) img[offset(i, j)] = values[i * cols + j];
    return img;
  }
  void upload(const std::vector<T>& img) const {
    auto h = Kokkos::create_mirror_view(base);
    for (std::size_t k = 0; k < img.size(); ++k) h(k) = img[k];
    Kokkos::deep_copy(base, h);
  }
  std::vector<T> download() const {
    auto h = Kokkos::create_mirror_view(base);
    Kokkos::deep_copy(h, base);
    return std::vector<T>(h.data(), h.data() + h.extent(0));
  }
  // The matrix's values (row-major rows x cols) in an image of the allocation.
  std::vector<T> values(const std::vector<T>& img) const {
    std::vector<T> v(rows * cols);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < cols; ++j) v[i * cols + j] = img[offset(i, j)];
    return v;
  }
};

using softfuse_test::random_values;

// Compares y (row-major rows x cols) with the double reference of x, and checks the invariants of
// every row (all NaN, or in [0, 1] summing to 1); counts failures per kind.
template <class T>
void expect_matches_reference(const std::vector<T>& x, const std::vector<T>& y, std::size_t rows, std::size_t cols,
                              const std::string& what) {
  std::vector<double> xd(cols), ref(cols);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j) xd[j] = x[i * cols + j];
    softfuse_test::reference_softmax_row(xd.data(), ref.data(), cols);
    const bool nan_row = cols > 0 && std::isnan(ref[0]);
    for (std::size_t j = 0; j < cols; ++j) {
      const double v = y[i * cols + j], r = ref[j];
      const bool ok = nan_row ? std::isnan(v) : (std::abs(v - r) <= Tolerance<T>::rel * r + (r >= 1e-30 ? 0.0 : 1e-37));
      if (!ok && bad++ < 5)
        ADD_FAILURE() << what << ": y(" << i << ", " << j << ") = " << v << ", reference " << r << ", relative error "
                      << std::abs(v - r) / r;
    }
    const std::string broken = softfuse_test::softmax_row_invariants(y.data() + i * cols, cols, Tolerance<T>::sum);
    if (!broken.empty() && bad++ < 5) ADD_FAILURE() << what << ": row " << i << ": " << broken;
  }
  EXPECT_EQ(bad, 0u) << what;
}

// How many elements of an allocation's image differ from the expected image (NaN equals NaN).
template <class T>
std::size_t count_changed(const std::vector<T>& image, const std::vector<T>& expected) {
  std::size_t changed = 0;
  for (std::size_t k = 0; k < image.size(); ++k)
    if (!(image[k] == expected[k] || (std::isnan(image[k]) && std::isnan(expected[k])))) ++changed;
  return changed;
}

// Runs softmax on `values` (rows x cols, row-major) through Views of Layout, out of place or in
// place, and checks every element against the reference and every byte outside the matrix.
template <class T, class Layout>
void run_case(std::size_t rows, std::size_t cols, const std::vector<T>& values, bool in_place,
              softfuse::Implementation impl = softfuse::Implementation::automatic, Strides strides = {}) {
  const std::string what = std::string(in_place ? "in place " : "") + std::to_string(rows) + "x" +
                           std::to_string(cols) + " " + typeid(Layout).name() + " " + typeid(T).name();
  const T sentinel = static_cast<T>(-777.0);  // never a softmax output
  Matrix<T, Layout> x(rows, cols, strides), y(rows, cols, strides);
  const auto x_image = x.image(values, sentinel);
  x.upload(x_image);
  y.upload(y.image(std::vector<T>(rows * cols, sentinel), sentinel));
  TestExecSpace space;
  if (in_place)
    softfuse::softmax(space, x.view(), x.view(), impl);
  else
    softfuse::softmax(space, x.view(), y.view(), impl);
  space.fence();

  const auto out_image     = (in_place ? x : y).download();
  const std::vector<T> out = (in_place ? x : y).values(out_image);
  expect_matches_reference(values, out, rows, cols, what);

  // Nothing outside the matrix was touched, and an out-of-place input is unchanged.
  EXPECT_EQ(count_changed(out_image, (in_place ? x : y).image(out, sentinel)), 0u)
      << what << ": elements outside the matrix changed";
  if (!in_place) EXPECT_EQ(count_changed(x.download(), x_image), 0u) << what << ": the input changed";
}

}  // namespace Test

#endif
