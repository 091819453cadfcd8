#ifndef SOFTFUSE_IMPLEMENTATION_HPP
#define SOFTFUSE_IMPLEMENTATION_HPP

namespace softfuse {

/// Which implementation an operation runs.
///  - automatic: the hand-tuned backend specialization where it applies (e.g. CUDA kernels for
///    contiguous device rows on Kokkos::Cuda), the portable team-policy one otherwise;
///  - portable: always the portable Kokkos team-policy implementation;
///  - specialized: the backend specialization, or std::invalid_argument where none applies.
enum class Implementation { automatic, portable, specialized };

}  // namespace softfuse

#endif
