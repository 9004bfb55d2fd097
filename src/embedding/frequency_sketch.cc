#include "embedding/frequency_sketch.h"

#include <algorithm>

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

constexpr uint64_t kBlockSeed = 0x9e3779b97f4a7c15ULL, kCounterSeed = 0xc2b2ae3d27d4eb4fULL;

}  // namespace

FrequencySketch::FrequencySketch(int64_t counters, int64_t reset_period) {
  blocks_ = (static_cast<size_t>(std::max<int64_t>(counters, 1024)) + 15) / 16;
  reset_period_ = reset_period > 0 ? reset_period : 10 * counters_per_row();
  const size_t bytes = blocks_ * kBlockBytes;
  counts_.assign(bytes + kBlockBytes - 1, 0);  // blocks start at a cache line: first_ bytes in
  first_ = (kBlockBytes - reinterpret_cast<uintptr_t>(counts_.data()) % kBlockBytes) % kBlockBytes;
}

size_t FrequencySketch::Block(uint64_t key) const {
  // The hash scaled to the blocks (no power of two needed).
  const auto block = static_cast<size_t>((static_cast<unsigned __int128>(Mix(key ^ kBlockSeed)) * blocks_) >> 64);
  return first_ + block * kBlockBytes;
}

// Four independent 4-bit picks, one a row: row r's counter is byte 16 r + (4 bits of the hash).
void FrequencySketch::InBlock(uint64_t key, size_t (&at)[kRows]) {
  const uint64_t h = Mix(key ^ kCounterSeed);
  for (int row = 0; row < kRows; ++row) at[row] = static_cast<size_t>(16 * row) + ((h >> (4 * row)) & 15);
}

void FrequencySketch::Add(uint64_t key) {
  // Conservative update: only the counters at the current minimum grow, which keeps collisions
  // from inflating the others.
  uint8_t* block = counts_.data() + Block(key);
  size_t at[kRows];
  InBlock(key, at);
  int least = 255;
  for (size_t a : at) least = std::min<int>(least, block[a]);
  if (least < 255) {
    for (size_t a : at) {
      if (block[a] == least) ++block[a];
    }
  }
  if (++added_ >= reset_period_) Halve();
}

int FrequencySketch::Estimate(uint64_t key) const {
  const uint8_t* block = counts_.data() + Block(key);
  size_t at[kRows];
  InBlock(key, at);
  int least = 255;
  for (size_t a : at) least = std::min<int>(least, block[a]);
  return least;
}

void FrequencySketch::Raise(uint64_t key, int count) {
  const auto at_least = static_cast<uint8_t>(std::clamp(count, 0, 255));
  uint8_t* block = counts_.data() + Block(key);
  size_t at[kRows];
  InBlock(key, at);
  for (size_t a : at) block[a] = std::max(block[a], at_least);
}

void FrequencySketch::Halve() {
  for (uint8_t& c : counts_) c >>= 1;
  added_ /= 2;  // TinyLFU's reset: the halved counts stand for half the increments
}

}  // namespace rankd
