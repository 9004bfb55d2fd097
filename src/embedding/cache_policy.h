// CachePolicy: which rows of the embedding tables a GPU cache of fixed size holds.
//
// Keys are 64-bit (RowKey: a table's index in the top 16 bits, the row below). The cache has
// `capacity` slots; a cached key owns one slot until it is evicted, so the device side keeps its
// rows in a [capacity, dim] buffer and an index from key to slot (docs/embedding.md).
//
// W-TinyLFU's core, sized for Zipf traffic: every access counts in a FrequencySketch (aged by
// halving, so a hot set that moves is followed); a miss on a full cache samples `sample` cached
// keys and proposes the least frequent as victim, and the missed key is admitted only if the
// sketch has seen it more often than the victim (a one-off scan cannot flush hot rows). An admitted
// key takes the victim's slot; each insertion (with what it evicted) is queued as a Change for the
// device side, which copies the rows off the request path.
//
// The trace simulator (`rankd bench cache`) runs this class as the server does. Not thread-safe:
// one owner feeds it accesses and takes its changes.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "embedding/frequency_sketch.h"
#include "embedding/slot_index.h"

namespace rankd {

// The cache key of row `row` of table `table` (table < 65,536, row < 2^48).
inline uint64_t RowKey(int table, int64_t row) {
  return (static_cast<uint64_t>(table) << 48) | (static_cast<uint64_t>(row) & ((uint64_t{1} << 48) - 1));
}

struct CachePolicyOptions {
  int64_t capacity = 0;         // slots (rows); at least 1, at most 2^31 - 1
  int sample = 8;               // cached keys sampled for a victim (at most 32)
  int64_t sketch_counters = 0;  // per sketch row; 0: four times the capacity (at least 1,024)
  int64_t reset_period = 0;     // sketch increments between halvings; 0: 30 a slot (30 x capacity)
  bool record_changes = true;   // queue Changes for the device side (the simulator turns it off)
  uint64_t seed = 1;            // the victim sampler's
};

class CachePolicy {
 public:
  explicit CachePolicy(const CachePolicyOptions& options);

  // An insertion into slot `slot`: the device side copies `key`'s row there; `evicted`, if any,
  // leaves the index.
  struct Change {
    uint64_t key;
    int64_t slot;
    std::optional<uint64_t> evicted;
  };

  // One lookup of `key`: true when it is cached now (a hit). A miss counts it and may admit it.
  bool Access(uint64_t key);
  // One lookup of `key` if it is cached: counted as Access counts a hit, and its slot returned;
  // nothing happens otherwise (the caller then Accesses it as a miss).
  std::optional<int64_t> Hit(uint64_t key) {
    const int64_t slot = slot_of_.Find(key);
    if (slot < 0) return std::nullopt;
    sketch_.Add(key);
    return slot;
  }
  // The changes queued since the last call, oldest first.
  std::vector<Change> TakeChanges();
  bool has_changes() const { return !changes_.empty(); }

  // The cached keys with their sketch estimates, most frequent first: a hotness snapshot that the
  // next run warms from (hotness_snapshot.h).
  std::vector<std::pair<uint64_t, int>> Snapshot() const;
  // The same in slot order, unsorted.
  std::vector<std::pair<uint64_t, int>> Counts() const;
  // Fills empty slots with `hottest` (most frequent first; keys already cached keep their slots)
  // and raises their estimates to the saved counts, so that they are not evicted by the first misses.
  void WarmStart(std::span<const std::pair<uint64_t, int>> hottest);
  // Into an empty policy: the keys a cache already holds (`keys_of_slots[s]`, -1 for an empty slot),
  // each in its slot and seen once, with no change queued (the device has them). Slots are taken
  // from 0 on, so the keys from the first empty slot on are not taken: the cache keeps them until
  // their slots are filled again.
  void Adopt(std::span<const int64_t> keys_of_slots);

  bool Contains(uint64_t key) const { return slot_of_.Contains(key); }
  // The slot `key` is cached in, if it is.
  std::optional<int64_t> SlotOf(uint64_t key) const {
    const int64_t slot = slot_of_.Find(key);
    return slot < 0 ? std::nullopt : std::optional<int64_t>(slot);
  }
  int64_t size() const { return slot_of_.size(); }
  // Hints that `key` is accessed soon: a caller feeding many keys calls it a few keys ahead, so
  // that their memory is read side by side.
  void Prefetch(uint64_t key) const {
    sketch_.Prefetch(key);
    slot_of_.Prefetch(key);
  }
  int64_t capacity() const { return capacity_; }
  const FrequencySketch& sketch() const { return sketch_; }
  // The host memory a policy of the default sketch size holds a slot: 16 bytes of sketch (four rows
  // of four counters), 18 of index (slot_index.h) and 8 of the slot's key.
  static constexpr size_t kBytesPerSlot = 42;
  // The host memory the policy holds: its sketch, its index and its slots' keys (about
  // kBytesPerSlot a slot; a cache of fewer than 256 rows keeps a sketch of 4 KiB).
  size_t bytes() const { return sketch_.bytes() + slot_of_.bytes() + key_of_.capacity() * sizeof(uint64_t); }

 private:
  void Insert(uint64_t key, int64_t slot, std::optional<uint64_t> evicted);

  const int64_t capacity_;
  const int sample_;
  const bool record_changes_;
  FrequencySketch sketch_;
  SlotIndex slot_of_;             // cached key -> its slot
  std::vector<uint64_t> key_of_;  // slot -> key; slots below size() are taken
  std::vector<Change> changes_;
  std::mt19937_64 rng_;
};

}  // namespace rankd
