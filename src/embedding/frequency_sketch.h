// FrequencySketch: how often each 64-bit key was seen lately, in a few bits per key of capacity.
//
// A count-min sketch (TinyLFU's): four rows of 8-bit saturating counters, one counter per row
// picked by a hash of the key; a key's estimate is the least of its four counters, so it never
// undercounts and overcounts only by collisions. The counters are blocked, as Caffeine's are: a
// key's four lie in one 64-byte block that the hash picks, 16 bytes of it per row, so that an
// update or an estimate reads one cache line, not four. Every `reset_period` increments all
// counters are halved, so what was hot long ago fades and a hot set that moves is followed within a
// period or two. Not thread-safe: one owner (the cache policy) feeds it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rankd {

class FrequencySketch {
 public:
  // `counters` per row, rounded up to a whole block (16 a row; at least 1,024: a sketch of few
  // blocks lets collisions decide); `reset_period` increments between halvings (0: ten times the
  // counters per row, TinyLFU's sample size).
  explicit FrequencySketch(int64_t counters, int64_t reset_period = 0);

  // Counts one sighting of `key`.
  void Add(uint64_t key);
  // The key's count since the halvings (at most 255).
  int Estimate(uint64_t key) const;
  // Raises the key's counters to at least `count` (a warm start from a saved snapshot).
  void Raise(uint64_t key, int count);
  // Halves every counter (Add does it every reset_period increments).
  void Halve();
  // Hints that `key` is counted or estimated soon.
  void Prefetch(uint64_t key) const { __builtin_prefetch(counts_.data() + Block(key)); }

  int64_t counters_per_row() const { return static_cast<int64_t>(blocks_) * 16; }
  size_t bytes() const { return counts_.size(); }
  int64_t reset_period() const { return reset_period_; }

 private:
  static constexpr int kRows = 4;
  static constexpr size_t kBlockBytes = 64;
  // The offset of the key's block in counts_, and of its counters (one a row) in that block, from
  // one hash.
  size_t Block(uint64_t key) const;
  static void InBlock(uint64_t key, size_t (&at)[kRows]);

  int64_t reset_period_ = 0;
  int64_t added_ = 0;  // increments since the last halving
  size_t blocks_ = 0;
  size_t first_ = 0;             // where in counts_ the first block starts
  std::vector<uint8_t> counts_;  // blocks_ blocks of kRows rows of 16 counters
};

}  // namespace rankd
