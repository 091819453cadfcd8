#ifndef SOFTFUSE_IMPL_DISTRIBUTED_AGREEMENT_HPP
#define SOFTFUSE_IMPL_DISTRIBUTED_AGREEMENT_HPP

// The cheap check every distributed call makes: a few extents that all ranks must share, reduced to their
// maximum and minimum across ranks in one small collective (plus one summed value, e.g. the batch rows),
// started before the local pass and waited for after it (Agreement<Comm>, one per communicator type). Every
// rank receives the same verdict, so every rank throws or none does.

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace softfuse {
namespace Impl {

constexpr int max_agreed_values = 4;

struct AgreedValues {
  std::int64_t value[max_agreed_values];
  const char* name[max_agreed_values];  // what each value is, for the error message
  int n;
  std::int64_t summed;  // summed over ranks
};

struct AgreementResult {
  std::int64_t max[max_agreed_values], min[max_agreed_values];
  std::int64_t total;  // `summed` over ranks
};

/// The reduction's send buffer: the values, then their negations (one MAX gives max and -min), then `summed`.
inline void agreement_buffer(const AgreedValues& v, std::int64_t* buffer) {
  for (int k = 0; k < v.n; ++k) {
    buffer[k]       = v.value[k];
    buffer[v.n + k] = -v.value[k];
  }
  buffer[2 * v.n] = v.summed;
}

inline AgreementResult agreement_result(const AgreedValues& v, const std::int64_t* buffer) {
  AgreementResult r{};
  for (int k = 0; k < v.n; ++k) {
    r.max[k] = buffer[k];
    r.min[k] = -buffer[v.n + k];
  }
  r.total = buffer[2 * v.n];
  return r;
}

/// Runs `checks` (this rank's argument checks) and returns the message of the std::invalid_argument they throw,
/// or "" where they pass: a rank must not throw before the collective the other ranks wait in.
template <class Checks>
std::string local_error(const Checks& checks) {
  try {
    checks();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

/// Throws std::invalid_argument on every rank where any rank's arguments are wrong: this rank's own
/// `error`, "<function>: invalid arguments on another rank", or "<function>: every rank must pass the same
/// <name> (this rank: a, across ranks: min to max)". value[0] of v must be 1 where `error` is empty, else 0.
inline void require_agreement(const char* function, const std::string& error, const AgreedValues& v,
                              const AgreementResult& r) {
  if (!error.empty()) throw std::invalid_argument(error);
  if (r.min[0] == 0) throw std::invalid_argument(std::string(function) + ": invalid arguments on another rank");
  for (int k = 1; k < v.n; ++k) {
    if (r.max[k] == r.min[k]) continue;
    std::ostringstream s;
    s << function << ": every rank must pass the same " << v.name[k] << " (this rank: " << v.value[k]
      << ", across ranks: " << r.min[k] << " to " << r.max[k] << ")";
    throw std::invalid_argument(s.str());
  }
}

template <class Comm>
class Agreement;

}  // namespace Impl
}  // namespace softfuse

#endif
