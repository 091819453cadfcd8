#include "Test_Cuda.hpp"
#include "Test_LinearPrecision.hpp"

#include <cuda_runtime_api.h>

#include <type_traits>

// The portable path's GEMM runs in the CUDA specialization's scope: the driver's default cache preference,
// not the device-wide preference for shared memory that Kokkos' CUDA initialization (3.x) sets, which slows
// cuBLAS's fp32 GEMM; and it leaves the device's preference as it found it.
TEST_F(cuda, linear_gemm_cache_preference) {
#ifdef SOFTFUSE_HAVE_CUDA_SPECIALIZED
  static_assert(std::is_same<softfuse::Impl::GemmScope<Kokkos::Cuda>::type,
                             softfuse::cuda_specialized::DefaultCachePreference>::value,
                "the portable GEMM on Kokkos::Cuda runs in DefaultCachePreference");
  cudaFuncCache kokkos = cudaFuncCachePreferNone, inside = cudaFuncCachePreferShared;
  ASSERT_EQ(cudaDeviceGetCacheConfig(&kokkos), cudaSuccess);
  ASSERT_EQ(cudaDeviceSetCacheConfig(cudaFuncCachePreferShared), cudaSuccess);
  {
    const softfuse::Impl::GemmScope<Kokkos::Cuda>::type scope;
    ASSERT_EQ(cudaDeviceGetCacheConfig(&inside), cudaSuccess);
  }
  EXPECT_EQ(inside, cudaFuncCachePreferNone);
  const Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::CudaSpace> x("x", 4, 32), w("w", 16, 32), y("y", 4, 16);
  const Kokkos::View<float*, Kokkos::CudaSpace> b("b", 16);
  Kokkos::deep_copy(x, 0.5f);
  Kokkos::deep_copy(w, 0.25f);
  for (auto impl : {softfuse::Implementation::portable, softfuse::Implementation::specialized}) {
    softfuse::linear_gelu_softmax(Kokkos::Cuda(), x, w, b, y, softfuse::Gelu::exact, impl);
    Kokkos::fence();
    cudaFuncCache after = cudaFuncCachePreferNone;
    ASSERT_EQ(cudaDeviceGetCacheConfig(&after), cudaSuccess);
    EXPECT_EQ(after, cudaFuncCachePreferShared);
    // equal logits: every probability 1/16
    const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), y);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 16; ++j) EXPECT_NEAR(h(i, j), 1.0f / 16, 1e-7f);
  }
  ASSERT_EQ(cudaDeviceSetCacheConfig(kokkos), cudaSuccess);
#else
  GTEST_SKIP() << "built without the CUDA specialization";
#endif
}
