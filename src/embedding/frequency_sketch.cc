#include "embedding/frequency_sketch.h"

#include <algorithm>
#include <bit>

namespace rankd {
namespace {

// SplitMix64's finaliser: every input bit moves every output bit.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr uint64_t kRowSeeds[4] = {0x9e3779b97f4a7c15ULL, 0xc2b2ae3d27d4eb4fULL, 0x165667b19e3779f9ULL,
                                   0xd6e8feb86659fd93ULL};

}  // namespace

FrequencySketch::FrequencySketch(int64_t counters, int64_t reset_period) {
  const uint64_t width = std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(counters, 64)));
  mask_ = static_cast<int64_t>(width - 1);
  reset_period_ = reset_period > 0 ? reset_period : 10 * static_cast<int64_t>(width);
  counts_.assign(static_cast<size_t>(kRows) * width, 0);
}

size_t FrequencySketch::Index(uint64_t key, int row) const {
  const uint64_t h = Mix(key ^ kRowSeeds[row]);
  return static_cast<size_t>(row) * static_cast<size_t>(mask_ + 1) +
         static_cast<size_t>(h & static_cast<uint64_t>(mask_));
}

void FrequencySketch::Add(uint64_t key) {
  // Conservative update: only the counters at the current minimum grow, which keeps collisions
  // from inflating the others.
  const int least = Estimate(key);
  if (least < 255) {
    for (int row = 0; row < kRows; ++row) {
      uint8_t& c = counts_[Index(key, row)];
      if (c == least) ++c;
    }
  }
  if (++added_ >= reset_period_) Halve();
}

int FrequencySketch::Estimate(uint64_t key) const {
  int least = 255;
  for (int row = 0; row < kRows; ++row) least = std::min<int>(least, counts_[Index(key, row)]);
  return least;
}

void FrequencySketch::Raise(uint64_t key, int count) {
  const auto at_least = static_cast<uint8_t>(std::clamp(count, 0, 255));
  for (int row = 0; row < kRows; ++row) {
    uint8_t& c = counts_[Index(key, row)];
    c = std::max(c, at_least);
  }
}

void FrequencySketch::Halve() {
  for (uint8_t& c : counts_) c >>= 1;
  added_ /= 2;  // TinyLFU's reset: the halved counts stand for half the increments
}

}  // namespace rankd
