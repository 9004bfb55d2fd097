// RowBits: a bit per row of a table, set and cleared by one writer while any thread tests them
// (relaxed atomics: a reader may see a change late, never a torn word). A GPU cache keeps which
// rows it holds this way on the host (backend/cuda/row_cache.h), and a run's misses are found by
// them (runtime/cuda/placed_ids.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace rankd {

class RowBits {
 public:
  explicit RowBits(int64_t rows)
      : rows_(rows), words_(std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>((rows + 63) / 64))) {
    for (int64_t w = 0; w < (rows + 63) / 64; ++w) words_[static_cast<size_t>(w)].store(0, std::memory_order_relaxed);
  }

  int64_t rows() const { return rows_; }
  bool Test(int64_t row) const {
    return (words_[static_cast<size_t>(row / 64)].load(std::memory_order_relaxed) >> (row % 64)) & 1;
  }
  void Set(int64_t row, bool on) {
    std::atomic<uint64_t>& word = words_[static_cast<size_t>(row / 64)];
    const uint64_t bit = uint64_t{1} << (row % 64);
    if (on)
      word.fetch_or(bit, std::memory_order_relaxed);
    else
      word.fetch_and(~bit, std::memory_order_relaxed);
  }

 private:
  int64_t rows_;
  std::unique_ptr<std::atomic<uint64_t>[]> words_;
};

}  // namespace rankd
