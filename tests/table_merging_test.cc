// MergeTablesSharingIds: random concatenations of bags and column lookups, some of them sharing
// their ids, score to the bit as written once their tables are merged; what must stay apart stays.
#include <gtest/gtest.h>

#include <random>

#include "compile/passes.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::GraphBuilder;
using testing::RandomTable;
using testing::RunGraph;

// One concatenation part and what decides whether it merges with its left neighbour.
struct Part {
  int value = -1;
  int group = -1;  // which ids it reads (-1: a copied part)
  int64_t table_rows = 0, column = -1;
  DType dtype = DType::kF32;
  std::string mode;
  bool table_shared = false;  // its table is read elsewhere too
};

bool Merges(const Part& left, const Part& right) {
  return left.group >= 0 && left.group == right.group && left.table_rows == right.table_rows &&
         left.dtype == right.dtype && left.mode == right.mode && left.column == right.column && !left.table_shared &&
         !right.table_shared;
}

struct Case {
  Graph graph;
  std::vector<Tensor> inputs;
  int mergeable_pairs = 0;  // adjacent parts that merge
};

// Groups of ids (ragged, padded or a padded matrix read by column), each read by a few bags or
// lookups whose tables mostly agree in rows, dtype and mode; copied parts between them.
Case RandomCase(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick(0, 5);
  const int64_t rows = 1 + pick(rng) * 3;
  GraphBuilder g;
  Case c;
  std::vector<Part> parts;
  const int groups = 1 + pick(rng) % 3;
  for (int group = 0; group < groups; ++group) {
    const int kind = pick(rng) % 3;  // 0 ragged, 1 padded, 2 lookup columns
    const int64_t table_rows = 5 + pick(rng), max_len = 1 + pick(rng) % 3;
    std::uniform_int_distribution<int64_t> id(kind == 2 ? -table_rows : -1, table_rows - 1), len(0, max_len);
    std::vector<int> ids;
    const std::string name = "ids" + std::to_string(group);
    if (kind == 0) {
      std::vector<int64_t> values, offsets{0};
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t n = len(rng); n > 0; --n) values.push_back(id(rng));
        offsets.push_back(static_cast<int64_t>(values.size()));
      }
      c.inputs.push_back(testing::MakeI64({static_cast<int64_t>(values.size())}, values));
      c.inputs.push_back(testing::MakeI64({rows + 1}, offsets));
      ids = {g.Input(name + ".values", DType::kI64, {-1}), g.Input(name + ".offsets", DType::kI64, {-1})};
    } else {
      const int64_t width = kind == 2 ? 3 : max_len;
      std::vector<int64_t> padded(static_cast<size_t>(rows * width));
      for (int64_t& v : padded) v = id(rng);
      c.inputs.push_back(testing::MakeI64({rows, width}, padded));
      ids = {g.Input(name, DType::kI64, {-1, width})};
    }
    const std::string mode = pick(rng) < 2 ? "mean" : "sum";
    const DType dtype = kind == 2 ? DType::kF32 : pick(rng) < 4 ? DType::kF32 : DType::kBF16;
    const int64_t column = kind == 2 ? pick(rng) % 3 : -1;
    for (int k = 1 + pick(rng) % 3; k > 0; --k) {
      Part p{-1, group, table_rows, column, dtype, mode, false};
      if (pick(rng) == 0) p.table_rows += 1;                                       // another table size
      if (kind != 2 && pick(rng) == 0) p.mode = p.mode == "sum" ? "mean" : "sum";  // another pooling
      if (kind == 2 && pick(rng) == 0) p.column = (p.column + 1) % 3;              // another column
      p.table_shared = pick(rng) == 0;
      const int64_t dim = 1 + pick(rng) * 3;
      const std::string table_name = "table" + std::to_string(parts.size());
      int table = g.Const(table_name, RandomTable(p.dtype, p.table_rows, dim, rng));
      if (kind == 2) {
        int col = g.Op("Gather", {ids[0], g.Const(table_name + ".c", testing::MakeI64({}, {p.column}))},
                       {{"axis", int64_t{1}}});
        p.value = g.Op("Gather", {table, col});
      } else {
        std::vector<int> in{table};
        in.insert(in.end(), ids.begin(), ids.end());
        p.value = g.Op("EmbeddingBag", in, {{"mode", p.mode}});
      }
      if (p.table_shared) {  // the same table, read by a bag of its own that is a graph output
        std::vector<int> in{table};
        if (kind == 2) {
          in.push_back(
              g.Op("Gather", {ids[0], g.Const(table_name + ".c2", testing::MakeI64({}, {0}))}, {{"axis", int64_t{1}}}));
          g.Output(g.Op("Gather", in));
        } else {
          in.insert(in.end(), ids.begin(), ids.end());
          g.Output(g.Op("EmbeddingBag", in));
        }
      }
      parts.push_back(p);
    }
    if (pick(rng) == 0) {  // a copied part between groups
      const int64_t width = 1 + pick(rng);
      c.inputs.push_back(testing::RandomF32({rows, width}, rng));
      Part copied;
      copied.value = g.Input("x" + std::to_string(group), DType::kF32, {-1, width});
      parts.push_back(copied);
    }
  }
  if (pick(rng) == 0) std::swap(parts.front(), parts.back());  // runs broken up
  std::vector<int> values;
  for (size_t p = 0; p < parts.size(); ++p) {
    values.push_back(parts[p].value);
    if (p > 0 && Merges(parts[p - 1], parts[p])) ++c.mergeable_pairs;
  }
  g.Output(g.Op("Concat", values, {{"axis", int64_t{1}}}));
  c.graph = g.graph();
  return c;
}

TEST(TableMerging, RandomConcatenationsScoreToTheBitAsWritten) {
  int merged_somewhere = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    Case c = RandomCase(seed);
    auto want = RunGraph(c.graph, c.inputs);
    ASSERT_TRUE(want.ok()) << "seed " << seed << ": " << want.status().ToString();
    ASSERT_EQ(FuseEmbeddingConcats(c.graph), 1) << "seed " << seed;
    const size_t constants = c.graph.constants.size();
    const int64_t bytes = c.graph.ConstantBytes();
    EXPECT_EQ(MergeTablesSharingIds(c.graph), c.mergeable_pairs) << "seed " << seed;
    // Each merge leaves one table instead of two, of the same bytes.
    EXPECT_EQ(c.graph.constants.size(), constants - static_cast<size_t>(c.mergeable_pairs)) << "seed " << seed;
    EXPECT_EQ(c.graph.ConstantBytes(), bytes) << "seed " << seed;
    merged_somewhere += c.mergeable_pairs > 0;
    auto got = RunGraph(c.graph, c.inputs);
    ASSERT_TRUE(got.ok()) << "seed " << seed << ": " << got.status().ToString();
    ASSERT_EQ(got->size(), want->size());
    for (size_t o = 0; o < want->size(); ++o) {
      ASSERT_EQ((*got)[o].shape(), (*want)[o].shape()) << "seed " << seed;
      EXPECT_EQ(testing::RelativeError((*got)[o], (*want)[o]), 0.0) << "seed " << seed << " output " << o;
    }
    if (const Backend* cuda = testing::CudaOrNull()) {
      auto on_gpu = RunGraph(c.graph, c.inputs, {}, *cuda);
      ASSERT_TRUE(on_gpu.ok()) << "seed " << seed << ": " << on_gpu.status().ToString();
      testing::ExpectOutputsNear(*on_gpu, *want, 1e-6, "seed " + std::to_string(seed) + " on CUDA");
    }
  }
  EXPECT_GT(merged_somewhere, 50);  // the cases exercise the merge, not only its refusals
}

TEST(TableMerging, MergedTableHoldsEachRowSideBySide) {
  GraphBuilder g;
  int a = g.Const("a", testing::MakeF32({2, 1}, {1, 2}));
  int b = g.Const("b", testing::MakeF32({2, 2}, {10, 20, 30, 40}));
  int ids = g.Input("ids", DType::kI64, {-1, 2});
  g.Output(g.Op("Concat", {g.Op("EmbeddingBag", {a, ids}), g.Op("EmbeddingBag", {b, ids})}, {{"axis", int64_t{1}}}));
  Graph& graph = g.graph();
  ASSERT_EQ(FuseEmbeddingConcats(graph), 1);
  ASSERT_EQ(MergeTablesSharingIds(graph), 1);
  ASSERT_EQ(graph.nodes.size(), 1u);
  EXPECT_EQ(graph.nodes[0].GetInts("parts"), std::vector<int64_t>{2});
  const Tensor& merged = graph.constants.at(graph.nodes[0].inputs[0]);
  EXPECT_EQ(merged.shape(), (Shape{2, 3}));
  EXPECT_EQ(std::vector<float>(merged.data<float>(), merged.data<float>() + 6),
            (std::vector<float>{1, 10, 20, 2, 30, 40}));
  EXPECT_EQ(graph.values[static_cast<size_t>(graph.nodes[0].inputs[0])].name, "a+b");
  // An id out of range is still refused, a -1 slot still skipped.
  auto scores = RunGraph(graph, {testing::MakeI64({2, 2}, {1, -1, 0, 1})});
  ASSERT_TRUE(scores.ok()) << scores.status().ToString();
  EXPECT_EQ(std::vector<float>((*scores)[0].data<float>(), (*scores)[0].data<float>() + 6),
            (std::vector<float>{2, 30, 40, 3, 40, 60}));
  EXPECT_EQ(RunGraph(graph, {testing::MakeI64({1, 2}, {0, 2})}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rankd
