// Sibling products merged (MergeSiblingProducts): MMoE's experts' first layers (Gemm, transB,
// biased, rectified) and attention-style projections (MatMul of a 3-D input, biased) read one
// input; merged into one product with its columns sliced apart, the graph scores as written on
// random inputs; products that differ in how they compute, read other inputs or weights that are
// not constants are left alone, and so are groups below the size asked for.
#include <gtest/gtest.h>

#include <random>

#include "compile/passes.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::CountOps;
using testing::GraphBuilder;
using testing::RandomF32;
using testing::RunGraph;

constexpr int64_t kWidth = 96;  // the input's columns

// Runs `graph` and a copy merged with `min_weights` on random inputs of 1 and 13 rows (made by
// `input(rows)`), expects the same outputs, and returns the merged copy.
template <typename MakeInputs>
Graph ExpectMergedScoresTheSame(const Graph& graph, int64_t min_weights, MakeInputs inputs_of, int* merged) {
  Graph rewritten = graph;
  *merged = MergeSiblingProducts(rewritten, min_weights);
  for (int64_t rows : {1, 13}) {
    const std::vector<Tensor> inputs = inputs_of(rows);
    auto want = RunGraph(graph, inputs);
    auto got = RunGraph(rewritten, inputs);
    EXPECT_TRUE(want.ok()) << want.status().ToString();
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!want.ok() || !got.ok()) return rewritten;
    EXPECT_EQ(got->size(), want->size());
    for (size_t o = 0; o < want->size() && o < got->size(); ++o) {
      SCOPED_TRACE("output " + std::to_string(o) + ", " + std::to_string(rows) + " rows");
      EXPECT_EQ((*got)[o].shape(), (*want)[o].shape());
      if ((*got)[o].shape() == (*want)[o].shape()) {
        EXPECT_LT(testing::RelativeError((*got)[o], (*want)[o]), 1e-5);
      }
    }
  }
  return rewritten;
}

// MMoE's shape: four experts (Gemm transB=1 with a bias and a Relu, then a second layer each),
// two gates (Gemm without activation), stacked and summed as the zoo's W4 is.
Graph Experts(std::mt19937_64& rng, bool gates_differ) {
  GraphBuilder g;
  const int x = g.Input("x", DType::kF32, {-1, kWidth});
  std::vector<int> outs;
  for (int e = 0; e < 4; ++e) {
    const int w = g.Const("w" + std::to_string(e), RandomF32({64, kWidth}, rng));  // [n, k]: transB
    const int b = g.Const("b" + std::to_string(e), RandomF32({64}, rng));
    const int h = g.Op("Gemm", {x, w, b}, {{"transB", int64_t{1}}, {"activation", std::string("Relu")}});
    const int w2 = g.Const("w2_" + std::to_string(e), RandomF32({64, 8}, rng));
    outs.push_back(g.Op("MatMul", {h, w2}));
  }
  g.Output(g.Op("Concat", outs, {{"axis", int64_t{1}}}));
  for (int t = 0; t < 2; ++t) {
    const int w = g.Const("gate" + std::to_string(t), RandomF32({4, kWidth}, rng));
    std::map<std::string, AttributeValue> attrs{{"transB", int64_t{1}}};
    if (gates_differ && t == 1) attrs["activation"] = std::string("Relu");
    g.Output(g.Op("Gemm", {x, w}, attrs));
  }
  return g.graph();
}

TEST(SiblingProducts, MmoeExpertsMergeIntoOneProductAndScoreTheSame) {
  std::mt19937_64 rng(3);
  const Graph graph = Experts(rng, /*gates_differ=*/false);
  auto inputs = [&](int64_t rows) { return std::vector<Tensor>{RandomF32({rows, kWidth}, rng)}; };
  int merged = 0;
  Graph rewritten = ExpectMergedScoresTheSame(graph, 1, inputs, &merged);
  EXPECT_EQ(merged, 2);  // the experts' first layers; the gates
  EXPECT_EQ(CountOps(rewritten, "Gemm"), 2);
  EXPECT_EQ(CountOps(rewritten, "MatMul"), 4);  // second layers read different inputs
  EXPECT_EQ(CountOps(rewritten, "Slice"), 6);
  // Below the size asked for, nothing merges: the experts' weights hold 4 x 64 x 96 values.
  ExpectMergedScoresTheSame(graph, 4 * 64 * kWidth + 1, inputs, &merged);
  EXPECT_EQ(merged, 0);
  ExpectMergedScoresTheSame(graph, 4 * 64 * kWidth, inputs, &merged);
  EXPECT_EQ(merged, 1);  // the experts, not the gates
}

TEST(SiblingProducts, ProductsThatComputeDifferentlyStayApart) {
  std::mt19937_64 rng(5);
  const Graph graph = Experts(rng, /*gates_differ=*/true);  // one gate rectified, the other not
  auto inputs = [&](int64_t rows) { return std::vector<Tensor>{RandomF32({rows, kWidth}, rng)}; };
  int merged = 0;
  Graph rewritten = ExpectMergedScoresTheSame(graph, 1, inputs, &merged);
  EXPECT_EQ(merged, 1);
  EXPECT_EQ(CountOps(rewritten, "Gemm"), 3);

  // Weights that are an input, and products of different inputs, are not siblings.
  GraphBuilder g;
  const int x = g.Input("x", DType::kF32, {-1, kWidth}), y = g.Input("y", DType::kF32, {-1, kWidth});
  const int w = g.Input("w", DType::kF32, {kWidth, 16});
  const int c = g.Const("c", RandomF32({kWidth, 16}, rng));
  g.Output(g.Op("MatMul", {x, w}));
  g.Output(g.Op("MatMul", {x, c}));
  g.Output(g.Op("MatMul", {y, c}));
  auto two = [&](int64_t rows) {
    return std::vector<Tensor>{RandomF32({rows, kWidth}, rng), RandomF32({rows, kWidth}, rng),
                               RandomF32({kWidth, 16}, rng)};
  };
  ExpectMergedScoresTheSame(g.graph(), 1, two, &merged);
  EXPECT_EQ(merged, 0);
}

TEST(SiblingProducts, ProjectionsOfASequenceMergeWithTheirBiases) {
  // Query, key and value projections of [rows, length, width] (MatMul with a bias row, as
  // FuseGemmEpilogues leaves them), one of them also a graph output.
  std::mt19937_64 rng(7);
  GraphBuilder g;
  const int x = g.Input("x", DType::kF32, {-1, 5, kWidth});
  std::vector<int> projections;
  for (const char* name : {"q", "k", "v"}) {
    const int w = g.Const(std::string(name) + ".w", RandomF32({kWidth, 32}, rng));
    const int b = g.Const(std::string(name) + ".b", RandomF32({32}, rng));
    projections.push_back(g.Op("MatMul", {x, w, b}));
  }
  g.Output(projections[2]);
  const int kt = g.Op("Transpose", {projections[1]}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  g.Output(g.Op("MatMul", {projections[0], kt}));
  auto inputs = [&](int64_t rows) { return std::vector<Tensor>{RandomF32({rows, 5, kWidth}, rng)}; };
  int merged = 0;
  Graph rewritten = ExpectMergedScoresTheSame(g.graph(), 1, inputs, &merged);
  EXPECT_EQ(merged, 1);
  EXPECT_EQ(CountOps(rewritten, "Slice"), 3);
  EXPECT_EQ(CountOps(rewritten, "MatMul"), 2);  // the merged projection and the scores
}

}  // namespace
}  // namespace rankd
