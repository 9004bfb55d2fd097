// SlotIndex: a cache policy's map from a cached 64-bit key to its slot, sized once for the
// cache's capacity.
//
// Open addressing with linear probing in one array of (key, slot) pairs, at most half full, and
// deletion by shifting the following entries back (no tombstones): a lookup is one cache miss on
// average, where a node-based map takes two or three, and an entry takes 32 bytes at most (16 in
// the array, which is twice the capacity rounded up to a power of two). The key ~0 is reserved
// (RowKey of table 65,535's last row). Not thread-safe.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

namespace rankd {

class SlotIndex {
 public:
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  explicit SlotIndex(int64_t capacity)
      : entries_(std::bit_ceil(static_cast<uint64_t>(2 * std::max<int64_t>(capacity, 1))), Entry{kEmpty, 0}),
        mask_(entries_.size() - 1) {}

  // The slot of `key`, or -1.
  int64_t Find(uint64_t key) const {
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      const Entry& e = entries_[i];
      if (e.key == key) return e.slot;
      if (e.key == kEmpty) return -1;
    }
  }
  bool Contains(uint64_t key) const { return Find(key) >= 0; }
  // Maps `key` (not present, not kEmpty) to `slot`.
  void Insert(uint64_t key, int64_t slot) {
    size_t i = Home(key);
    while (entries_[i].key != kEmpty) i = (i + 1) & mask_;
    entries_[i] = {key, slot};
    ++size_;
  }
  // Removes `key` if present.
  void Erase(uint64_t key) {
    size_t i = Home(key);
    while (entries_[i].key != key) {
      if (entries_[i].key == kEmpty) return;
      i = (i + 1) & mask_;
    }
    // Backward shift: each later entry of the run that may sit at `i` moves there.
    for (size_t j = (i + 1) & mask_; entries_[j].key != kEmpty; j = (j + 1) & mask_) {
      const size_t home = Home(entries_[j].key);
      // j's entry may move to i when its home is not cyclically within (i, j].
      if (((j - home) & mask_) >= ((j - i) & mask_)) {
        entries_[i] = entries_[j];
        i = j;
      }
    }
    entries_[i].key = kEmpty;
    --size_;
  }
  // Hints that `key` is looked up soon.
  void Prefetch(uint64_t key) const { __builtin_prefetch(&entries_[Home(key)]); }
  int64_t size() const { return size_; }

 private:
  struct Entry {
    uint64_t key;
    int64_t slot;
  };
  size_t Home(uint64_t key) const {
    key ^= key >> 33;  // Murmur3's finaliser
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return static_cast<size_t>(key) & mask_;
  }

  std::vector<Entry> entries_;
  size_t mask_;
  int64_t size_ = 0;
};

}  // namespace rankd
