// Shape (include/rankd/shape.h) against std::vector<int64_t>: the same edits on both, at every rank
// from empty through inline storage to the heap and back.
#include "rankd/shape.h"

#include <gtest/gtest.h>

#include <random>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

namespace rankd {
namespace {

std::vector<int64_t> AsVector(const Shape& s) { return std::vector<int64_t>(s.begin(), s.end()); }

TEST(Shape, RandomEditsMatchAVector) {
  std::mt19937_64 rng(7);
  Shape s;
  std::vector<int64_t> v;
  for (int step = 0; step < 20000; ++step) {
    const int64_t x = static_cast<int64_t>(rng() % 1000) - 1;
    const size_t at = v.empty() ? 0 : rng() % (v.size() + 1);
    switch (rng() % 9) {
      case 0:
      case 1:
        s.push_back(x);
        v.push_back(x);
        break;
      case 2:
        if (!v.empty()) {
          s.pop_back();
          v.pop_back();
        }
        break;
      case 3:
        s.insert(s.begin() + at, x);
        v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), x);
        break;
      case 4: {  // a range taken from the shape itself
        const std::vector<int64_t> copy = v;
        const size_t from = copy.empty() ? 0 : rng() % copy.size();
        const size_t n = copy.empty() ? 0 : rng() % (copy.size() - from + 1);
        s.insert(s.begin() + at, s.begin() + from, s.begin() + from + n);
        v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), copy.begin() + static_cast<std::ptrdiff_t>(from),
                 copy.begin() + static_cast<std::ptrdiff_t>(from + n));
        break;
      }
      case 5:
        if (at < v.size()) {
          const size_t n = rng() % (v.size() - at + 1);
          s.erase(s.begin() + at, s.begin() + at + n);
          v.erase(v.begin() + static_cast<std::ptrdiff_t>(at), v.begin() + static_cast<std::ptrdiff_t>(at + n));
        }
        break;
      case 6: {
        const size_t n = rng() % 12;
        s.resize(n, x);
        v.resize(n, x);
        break;
      }
      case 7:
        s.insert(s.begin() + at, 3, x);
        v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), 3, x);
        break;
      default:
        if (v.size() > 16) {
          s.clear();
          v.clear();
        }
    }
    ASSERT_EQ(AsVector(s), v) << "step " << step;
    ASSERT_EQ(s.size(), v.size());
    if (!v.empty()) {
      ASSERT_EQ(s.front(), v.front());
      ASSERT_EQ(s.back(), v.back());
    }
  }
}

TEST(Shape, CopiesAndMovesKeepTheirDimensionsInlineAndOnTheHeap) {
  for (size_t rank : {size_t{0}, size_t{1}, Shape::kInlineRank, Shape::kInlineRank + 1, size_t{40}}) {
    Shape a;
    for (size_t i = 0; i < rank; ++i) a.push_back(static_cast<int64_t>(i * 3 + 1));
    const std::vector<int64_t> want = AsVector(a);
    Shape copy = a;
    EXPECT_EQ(AsVector(copy), want);
    copy.push_back(9);  // the copy owns its dimensions
    EXPECT_EQ(AsVector(a), want);
    Shape moved = std::move(a);
    EXPECT_EQ(AsVector(moved), want);
    EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): a moved-from shape is empty
    Shape assigned{5, 6};
    assigned = moved;
    EXPECT_EQ(AsVector(assigned), want);
    Shape move_assigned{5, 6, 7, 8, 9, 10, 11, 12};
    move_assigned = std::move(moved);
    EXPECT_EQ(AsVector(move_assigned), want);
    const Shape& alias = assigned;
    assigned = alias;  // self-assignment
    EXPECT_EQ(AsVector(assigned), want);
    EXPECT_EQ(rank <= Shape::kInlineRank, move_assigned.capacity() == Shape::kInlineRank);
  }
}

TEST(Shape, ComparesAndConvertsLikeAVector) {
  const std::vector<int64_t> dims{4, -1, 8};
  const Shape s = dims;  // from a vector
  EXPECT_EQ(s, (Shape{4, -1, 8}));
  EXPECT_NE(s, (Shape{4, -1}));
  EXPECT_LT((Shape{1, 2}), (Shape{1, 3}));
  EXPECT_LT((Shape{1, 2}), (Shape{1, 2, 0}));
  std::span<const int64_t> view = s;
  EXPECT_EQ(std::vector<int64_t>(view.begin(), view.end()), dims);
  EXPECT_EQ(s.ToVector(), dims);
  EXPECT_EQ((Shape(3, 7)), (Shape{7, 7, 7}));
  EXPECT_EQ(s.at(2), 8);
  EXPECT_THROW(static_cast<void>(s.at(3)), std::out_of_range);
  const Shape scalar;
  EXPECT_TRUE(scalar.empty());
  EXPECT_EQ(AsVector(Shape(s.rbegin(), s.rend())), (std::vector<int64_t>{8, -1, 4}));
}

}  // namespace
}  // namespace rankd
