// SlotIndex: a cache policy's map from a cached 64-bit key to its slot, sized once for the
// cache's capacity.
//
// Open addressing with linear probing in one array of packed 12-byte (key, slot) entries, one and
// a half per slot of capacity (at most two thirds full), and deletion by shifting the following
// entries back (no tombstones): a lookup is one cache miss on average, where a node-based map
// takes two or three, and the index costs 18 bytes a slot (a host cache of 256-byte rows stays
// within 1.2 times their bytes, docs/embedding.md). A key's home entry is its hash scaled to the
// array's length (no power of two needed). The key ~0 is reserved (RowKey of table 65,535's last
// row). Not thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace rankd {

class SlotIndex {
 public:
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  explicit SlotIndex(int64_t capacity)
      : entries_(static_cast<size_t>(std::max<int64_t>(capacity, 1)) * 3 / 2 + 1, Entry{kEmpty, 0}) {}

  // The slot of `key`, or -1.
  int64_t Find(uint64_t key) const {
    for (size_t i = Home(key);; i = Next(i)) {
      const Entry& e = entries_[i];
      if (e.key == key) return e.slot;
      if (e.key == kEmpty) return -1;
    }
  }
  bool Contains(uint64_t key) const { return Find(key) >= 0; }
  // Maps `key` (not present, not kEmpty) to `slot`.
  void Insert(uint64_t key, int64_t slot) {
    size_t i = Home(key);
    while (entries_[i].key != kEmpty) i = Next(i);
    entries_[i] = {key, static_cast<int32_t>(slot)};
    ++size_;
  }
  // Removes `key` if present.
  void Erase(uint64_t key) {
    size_t i = Home(key);
    while (entries_[i].key != key) {
      if (entries_[i].key == kEmpty) return;
      i = Next(i);
    }
    // Backward shift: each later entry of the run that may sit at `i` moves there.
    for (size_t j = Next(i); entries_[j].key != kEmpty; j = Next(j)) {
      // j's entry may move to i when its home is not cyclically within (i, j].
      if (Distance(Home(entries_[j].key), j) >= Distance(i, j)) {
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
  size_t bytes() const { return entries_.size() * sizeof(Entry); }

 private:
#pragma pack(push, 4)
  struct Entry {
    uint64_t key;
    int32_t slot;  // capacities stay below 2^31 (the GPU cache's slot is an int32 too)
  };
#pragma pack(pop)
  static_assert(sizeof(Entry) == 12);
  size_t Home(uint64_t key) const {
    key ^= key >> 33;  // Murmur3's finaliser
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return static_cast<size_t>((static_cast<unsigned __int128>(key) * entries_.size()) >> 64);
  }
  size_t Next(size_t i) const { return i + 1 == entries_.size() ? 0 : i + 1; }
  // Steps from `from` forward to `to`, around the array's end.
  size_t Distance(size_t from, size_t to) const { return to >= from ? to - from : to + entries_.size() - from; }

  std::vector<Entry> entries_;
  int64_t size_ = 0;
};

}  // namespace rankd
