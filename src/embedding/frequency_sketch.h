// FrequencySketch: how often each 64-bit key was seen lately, in a few bits per key of capacity.
//
// A count-min sketch (TinyLFU's): four rows of 8-bit saturating counters, one counter per row
// picked by an independent hash of the key; a key's estimate is the least of its four counters, so
// it never undercounts and overcounts only by collisions. Every `reset_period` increments all
// counters are halved, so what was hot long ago fades and a hot set that moves is followed within a
// period or two. Not thread-safe: one owner (the cache policy) feeds it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rankd {

class FrequencySketch {
 public:
  // `counters` per row, rounded up to a power of two (at least 64); `reset_period` increments
  // between halvings (0: ten times the counters per row, TinyLFU's sample size).
  explicit FrequencySketch(int64_t counters, int64_t reset_period = 0);

  // Counts one sighting of `key`.
  void Add(uint64_t key);
  // The key's count since the halvings (at most 255).
  int Estimate(uint64_t key) const;
  // Raises the key's counters to at least `count` (a warm start from a saved snapshot).
  void Raise(uint64_t key, int count);
  // Halves every counter (Add does it every reset_period increments).
  void Halve();

  int64_t counters_per_row() const { return mask_ + 1; }
  int64_t reset_period() const { return reset_period_; }

 private:
  static constexpr int kRows = 4;
  size_t Index(uint64_t key, int row) const;

  int64_t mask_ = 0;
  int64_t reset_period_ = 0;
  int64_t added_ = 0;            // increments since the last halving
  std::vector<uint8_t> counts_;  // kRows rows of mask_ + 1 counters
};

}  // namespace rankd
