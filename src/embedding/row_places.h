// RowPlaces: a run's distinct rows and the places they were given (disk_tables.cc stages each
// distinct row of a run once, however many of its ids name it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace rankd {

// A run's distinct rows of one shard and their places: open addressing over a power of two of
// slots, grown at half full (a run's ids repeat: Zipf traffic).
class RowPlaces {
 public:
  // Room for `rows` distinct rows without growing.
  explicit RowPlaces(size_t rows) {
    size_t slots = 64;
    while (slots < rows * 2 + 2) slots *= 2;
    rows_.assign(slots, -1);
    places_.resize(slots);
  }

  // The place of `row`, given `next` (then the next place) if it has none yet.
  int32_t Find(int64_t row, int32_t next) {
    if (static_cast<size_t>(next) * 2 >= rows_.size()) Grow();
    size_t at = Hash(row) & (rows_.size() - 1);
    while (rows_[at] >= 0 && rows_[at] != row) at = (at + 1) & (rows_.size() - 1);
    if (rows_[at] < 0) {
      rows_[at] = row;
      places_[at] = next;
    }
    return places_[at];
  }

 private:
  static size_t Hash(int64_t row) {
    return static_cast<size_t>((static_cast<uint64_t>(row) * 0x9E3779B97F4A7C15ull) >> 20);
  }
  void Grow() {
    std::vector<int64_t> rows(rows_.size() * 2, -1);
    std::vector<int32_t> places(rows.size());
    for (size_t i = 0; i < rows_.size(); ++i) {
      if (rows_[i] < 0) continue;
      size_t at = Hash(rows_[i]) & (rows.size() - 1);
      while (rows[at] >= 0) at = (at + 1) & (rows.size() - 1);
      rows[at] = rows_[i];
      places[at] = places_[i];
    }
    rows_ = std::move(rows);
    places_ = std::move(places);
  }
  std::vector<int64_t> rows_;
  std::vector<int32_t> places_;
};

}  // namespace rankd
