#include "common/narrow_ids.h"

#include <algorithm>

namespace rankd {

// Block by block: a block whose ids all fit (nearly always) is truncated, which vectorises where
// the clamp does not; one that holds an id outside INT32's range is clamped. An AVX2 clone is
// chosen at load time where the CPU has it (W1 at 512 pairs: 75,000 ids, packed on the request's
// path).
__attribute__((target_clones("avx2", "default"))) void NarrowIds(const int64_t* from, int32_t* to, size_t n) {
  constexpr size_t kBlock = 512;
  for (size_t begin = 0; begin < n; begin += kBlock) {
    const size_t end = std::min(n, begin + kBlock);
    uint64_t outside = 0;  // nonzero when an id is outside [INT32_MIN, INT32_MAX]
    for (size_t i = begin; i < end; ++i) outside |= (static_cast<uint64_t>(from[i]) + uint64_t{0x80000000}) >> 32;
    if (outside == 0) {
      for (size_t i = begin; i < end; ++i) to[i] = static_cast<int32_t>(from[i]);
    } else {
      for (size_t i = begin; i < end; ++i) to[i] = NarrowId(from[i]);
    }
  }
}

}  // namespace rankd
