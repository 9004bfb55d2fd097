// A run's distinct rows and their places (embedding/row_places.h): each row keeps the place it was
// first given, however often it recurs and however far the set grows past the room it was made with.
#include "embedding/row_places.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace rankd {
namespace {

TEST(RowPlaces, EachRowKeepsItsFirstPlaceThroughGrowth) {
  for (size_t room : {size_t{0}, size_t{1}, size_t{100}, size_t{5000}}) {
    std::mt19937_64 rng(room + 7);
    // Zipf-like repeats over a wide range of rows, row 0 and the largest ids included.
    std::uniform_int_distribution<int64_t> wide(0, (int64_t{1} << 40));
    std::uniform_int_distribution<int64_t> hot(0, 300);
    RowPlaces places(room);
    std::unordered_map<int64_t, int32_t> reference;
    int32_t next = 0;
    for (int i = 0; i < 20000; ++i) {
      int64_t row = i % 3 == 0 ? wide(rng) : hot(rng);
      if (i == 5) row = 0;
      if (i == 6) row = INT64_MAX;
      const int32_t place = places.Find(row, next);
      auto [it, fresh] = reference.try_emplace(row, next);
      ASSERT_EQ(place, it->second) << "row " << row << ", lookup " << i << ", room " << room;
      if (fresh) ++next;
    }
    EXPECT_EQ(static_cast<size_t>(next), reference.size());
  }
}

TEST(RowPlaces, RowsThatShareTheirHashBitsStayApart) {
  // Rows equal in the bits Hash keeps collide on the same slot: probing must tell them apart.
  RowPlaces places(4);
  for (int32_t k = 0; k < 200; ++k) ASSERT_EQ(places.Find(int64_t{k} << 44, k), k);
  for (int32_t k = 0; k < 200; ++k) ASSERT_EQ(places.Find(int64_t{k} << 44, 1000 + k), k);
}

}  // namespace
}  // namespace rankd
