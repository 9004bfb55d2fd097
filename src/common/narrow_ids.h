// INT64 ids held in 32 bits: each clamped to INT32's range. A clamped id stays out of range of
// any table of at most INT32_MAX rows, and a negative one stays negative, so a bag treats it as it
// would the original (compile/narrowable_ids.h: which inputs the executors narrow).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

namespace rankd {

// to[i] = from[i] clamped to INT32's range, for i < n.
void NarrowIds(const int64_t* from, int32_t* to, size_t n);

// `value` clamped to INT32's range.
inline int32_t NarrowId(int64_t value) {
  constexpr int64_t kMin = std::numeric_limits<int32_t>::min(), kMax = std::numeric_limits<int32_t>::max();
  return static_cast<int32_t>(value < kMin ? kMin : value > kMax ? kMax : value);
}

}  // namespace rankd
