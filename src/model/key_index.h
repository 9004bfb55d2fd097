// The index of a keyed embedding table (docs/embedding.md, "Keyed tables"): which row of the
// table holds a 64-bit key's vector. An open-addressing array of a power-of-two number of slots,
// at least twice the keys, each slot a key and its row side by side (INT64 [slots, 2], so a probe
// reads one 16-byte piece), a row of -1 marking an empty slot. A key starts at slot
// MixKey(key) & (slots - 1) and probes the next slots until it meets itself or an empty one. Host
// and device code share the probe (RowOfKey), so the CPU kernel, the CUDA kernel and the cache
// keeper's trace all map a key to the same row.
#pragma once

#include <cstdint>
#include <span>

#include "common/host_device.h"
#include "rankd/status.h"
#include "rankd/tensor.h"

namespace rankd {

// SplitMix64's finaliser: every bit of the key reaches the low bits that pick a slot, so raw
// feature ids that differ only in their high bits (or are multiples of a power of two) spread.
RANKD_HOST_DEVICE inline uint64_t MixKey(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The row of `key` in `slots` ([mask + 1, 2]: key, row), or -1 when the index does not hold it.
RANKD_HOST_DEVICE inline int64_t RowOfKey(const int64_t* slots, uint64_t mask, int64_t key) {
  for (uint64_t s = MixKey(static_cast<uint64_t>(key)) & mask;; s = (s + 1) & mask) {
    const int64_t row = slots[2 * s + 1];
    if (row < 0) return -1;
    if (slots[2 * s] == key) return row;
  }
}

// The index of `keys`, key i in row i: INT64 [slots, 2]. Errors: a key given twice (naming it and
// both rows), more than 2^31 - 2 keys.
StatusOr<Tensor> BuildKeyIndex(std::span<const int64_t> keys);

// RowOfKey over an index BuildKeyIndex made (host memory).
int64_t FindKey(const Tensor& index, int64_t key);

}  // namespace rankd
