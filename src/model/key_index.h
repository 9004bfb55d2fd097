// The index of a keyed embedding table (docs/embedding.md, "Keyed tables"): which row of the
// table holds a 64-bit key's vector. An open-addressing array of a power-of-two capacity, at
// least twice the keys: `keys[s]` and `rows[s]` the key in slot s and its row, `rows[s] == -1`
// an empty slot. A key starts at slot MixKey(key) & (capacity - 1) and probes the next slots
// until it meets itself or an empty one. Host and device code share the probe (RowOfKey), so
// the CPU kernel, the CUDA kernel and the cache keeper's trace all map a key to the same row.
#pragma once

#include <cstdint>
#include <span>

#include "rankd/status.h"
#include "rankd/tensor.h"

#if defined(__CUDACC__)
#define RANKD_HOST_DEVICE __host__ __device__
#else
#define RANKD_HOST_DEVICE
#endif

namespace rankd {

// SplitMix64's finaliser: every bit of the key reaches the low bits that pick a slot, so raw
// feature ids that differ only in their high bits (or are multiples of a power of two) spread.
RANKD_HOST_DEVICE inline uint64_t MixKey(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The row of `key`, or -1 when the index does not hold it. `mask` is the capacity minus one.
RANKD_HOST_DEVICE inline int64_t RowOfKey(const int64_t* keys, const int32_t* rows, uint64_t mask, int64_t key) {
  for (uint64_t s = MixKey(static_cast<uint64_t>(key)) & mask;; s = (s + 1) & mask) {
    const int32_t row = rows[s];
    if (row < 0) return -1;
    if (keys[s] == key) return row;
  }
}

struct KeyIndex {
  Tensor keys;  // INT64 [capacity]
  Tensor rows;  // INT32 [capacity], -1 for an empty slot
};

// The index of `keys`, key i in row i. Errors: a key given twice (naming it and both rows), more
// than 2^31 - 2 keys.
StatusOr<KeyIndex> BuildKeyIndex(std::span<const int64_t> keys);

// RowOfKey over the index's tensors (host memory).
int64_t FindKey(const KeyIndex& index, int64_t key);

}  // namespace rankd
