// The DIN first-layer split (SplitConcatProducts) and broadcasts read unexpanded
// (ReadBroadcastsUnexpanded): random graphs score the same rewritten as written, at shapes other
// than the probe's; the DIN pattern becomes three narrow products; what must not change does not.
#include <gtest/gtest.h>

#include <random>

#include "compile/passes.h"
#include "compile/plan.h"
#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::CountOps;
using testing::GraphBuilder;
using testing::MakeF32;
using testing::MakeI64;
using testing::RandomF32;
using testing::RunGraph;

// Plans `graph` at keys [7, 3, d], query [7, d] (the probe), runs both passes on a copy and checks
// both graphs agree on random inputs of other sizes. Returns the number of products split.
int ExpectRewrittenScoresTheSame(const Graph& graph, int64_t d, uint64_t seed, Graph* rewritten_out = nullptr) {
  auto probe = Plan::Build(graph, {{DType::kF32, {7, 3, d}, nullptr}, {DType::kF32, {7, d}, nullptr}});
  EXPECT_TRUE(probe.ok()) << probe.status().ToString();
  if (!probe.ok()) return 0;
  Graph rewritten = graph;
  int split = SplitConcatProducts(rewritten, (*probe)->values());
  ReadBroadcastsUnexpanded(rewritten);
  std::mt19937_64 rng(seed);
  for (auto [rows, length] : {std::pair<int64_t, int64_t>{5, 4}, {1, 1}, {9, 2}}) {
    std::vector<Tensor> inputs = {RandomF32({rows, length, d}, rng, -1, 1), RandomF32({rows, d}, rng, -1, 1)};
    auto want = RunGraph(graph, inputs);
    auto got = RunGraph(rewritten, inputs);
    EXPECT_TRUE(want.ok()) << want.status().ToString();
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!want.ok() || !got.ok()) return split;
    for (size_t o = 0; o < want->size(); ++o) {
      EXPECT_EQ((*got)[o].shape(), (*want)[o].shape()) << "seed " << seed;
      EXPECT_LE(testing::RelativeError((*got)[o], (*want)[o]), 1e-5) << "seed " << seed;
    }
  }
  if (rewritten_out) *rewritten_out = std::move(rewritten);
  return split;
}

// DIN's attention input: q expanded over the sequence, k, q - k, q * k side by side, times W,
// plus a bias.
Graph DinAttention(int64_t d, int64_t h, std::mt19937_64& rng) {
  GraphBuilder b;
  int keys = b.Input("keys", DType::kF32, {-1, -1, d});
  int query = b.Input("query", DType::kF32, {-1, d});
  int q = b.Op("Expand", {b.Op("Unsqueeze", {query, b.Const("one", MakeI64({1}, {1}))}), b.Op("Shape", {keys})});
  int c = b.Op("Concat", {q, keys, b.Op("Sub", {q, keys}), b.Op("Mul", {q, keys})}, {{"axis", int64_t{-1}}});
  int product = b.Op("MatMul", {c, b.Const("w", RandomF32({4 * d, h}, rng, -1, 1))});
  b.Output(b.Op("Relu", {b.Op("Add", {b.Const("bias", RandomF32({h}, rng, -1, 1)), product})}));
  return std::move(b.graph());
}

TEST(ProductSplit, DinAttentionBecomesThreeNarrowProducts) {
  std::mt19937_64 rng(1);
  Graph graph = DinAttention(6, 5, rng);
  Graph split;
  ASSERT_EQ(ExpectRewrittenScoresTheSame(graph, 6, 11, &split), 1);
  EXPECT_EQ(CountOps(split, "Concat"), 0);
  EXPECT_EQ(CountOps(split, "Sub"), 0);     // folded into the weights of q and k
  EXPECT_EQ(CountOps(split, "Expand"), 0);  // q's product and q * k broadcast instead
  EXPECT_EQ(CountOps(split, "MatMul"), 3);
  for (const Node& n : split.nodes) {
    if (n.op == "MatMul") {
      EXPECT_EQ(split.constants.at(n.inputs[1]).shape(), Shape({6, 5}));
    }
  }
}

// A random concatenation of parts drawn from q (expanded), k, their sums, differences and
// products and an unrelated value, on the last axis or not, times a constant or not, with or
// without a bias, its concatenation read elsewhere or not.
Graph RandomConcatProduct(uint64_t seed, int64_t d, bool& may_split) {
  std::mt19937_64 rng(seed);
  auto coin = [&](int in) { return std::uniform_int_distribution<int>(0, in - 1)(rng) == 0; };
  GraphBuilder b;
  int keys = b.Input("keys", DType::kF32, {-1, -1, d});
  int query = b.Input("query", DType::kF32, {-1, d});
  int q = b.Op("Expand", {b.Op("Unsqueeze", {query, b.Const("one", MakeI64({1}, {1}))}), b.Op("Shape", {keys})});
  int other = b.Op("Tanh", {keys});
  std::vector<int> pool = {q, keys, other};
  pool.push_back(b.Op("Sub", {q, keys}));
  pool.push_back(b.Op("Sub", {keys, q}));
  pool.push_back(b.Op("Add", {keys, q}));
  pool.push_back(b.Op("Mul", {q, keys}));
  pool.push_back(b.Op("Sub", {other, keys}));
  std::vector<int> parts;
  int count = std::uniform_int_distribution<int>(1, 6)(rng);
  for (int i = 0; i < count; ++i) parts.push_back(pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)]);
  int64_t axis = coin(5) ? 1 : (coin(2) ? -1 : 2);
  int c = b.Op("Concat", parts, {{"axis", axis}});
  int64_t rows = axis == 1 ? d : d * count;
  const int64_t h = 3;
  bool constant = !coin(6);
  int w = constant ? b.Const("w", RandomF32({rows, h}, rng, -1, 1))
                   : b.Op("Tanh", {b.Const("w", RandomF32({rows, h}, rng, -1, 1))});
  int product = b.Op("MatMul", {c, w});
  if (coin(2)) {
    int bias = b.Const("bias", RandomF32(coin(2) ? Shape{h} : Shape{1, 1, h}, rng, -1, 1));
    product = coin(2) ? b.Op("Add", {product, bias}) : b.Op("Add", {bias, product});
  }
  b.Output(b.Op("Sigmoid", {product}));
  bool shared = coin(6);
  if (shared) b.Output(c);  // the concatenation is needed anyway: left alone
  may_split = axis != 1 && constant && !shared;
  return std::move(b.graph());
}

TEST(ProductSplit, RandomConcatProductsScoreTheSameRewritten) {
  int split = 0, left = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    bool may_split = false;
    Graph graph = RandomConcatProduct(seed, 4, may_split);
    int n = ExpectRewrittenScoresTheSame(graph, 4, seed);
    if (!may_split) {
      EXPECT_EQ(n, 0) << "seed " << seed;
    }
    (n > 0 ? split : left)++;
  }
  EXPECT_GT(split, 50);  // both outcomes occur
  EXPECT_GT(left, 50);
}

TEST(ProductSplit, DistinctPartsWithoutBroadcastsAreLeftAlone) {
  std::mt19937_64 rng(2);
  GraphBuilder b;
  int keys = b.Input("keys", DType::kF32, {-1, -1, 4});
  b.Input("query", DType::kF32, {-1, 4});
  int c = b.Op("Concat", {keys, b.Op("Tanh", {keys})}, {{"axis", int64_t{2}}});
  b.Output(b.Op("MatMul", {c, b.Const("w", RandomF32({8, 3}, rng, -1, 1))}));
  Graph graph = std::move(b.graph());
  EXPECT_EQ(ExpectRewrittenScoresTheSame(graph, 4, 3), 0);  // two products of K=4 cost what one of K=8 does
}

TEST(ReadBroadcastsUnexpanded, OnlyAgainstTheValueWhoseShapeItExpandsTo) {
  GraphBuilder b;
  int keys = b.Input("keys", DType::kF32, {-1, -1, 4});
  int query = b.Input("query", DType::kF32, {-1, 4});
  int q = b.Op("Expand", {b.Op("Unsqueeze", {query, b.Const("one", MakeI64({1}, {1}))}), b.Op("Shape", {keys})});
  int first = b.Op("ReduceSum", {keys, b.Const("axes", MakeI64({1}, {1}))}, {{"keepdims", int64_t{1}}});  // [B, 1, 4]
  b.Output(b.Op("Mul", {q, keys}));   // q expands to keys' shape: read unexpanded
  b.Output(b.Op("Add", {first, q}));  // [B, 1, 4] + q: the expansion gives the shape, kept
  Graph graph = std::move(b.graph());
  Graph rewritten;
  EXPECT_EQ(ExpectRewrittenScoresTheSame(graph, 4, 5, &rewritten), 0);
  EXPECT_EQ(CountOps(rewritten, "Expand"), 1);
  std::vector<int> producers = rewritten.Producers();
  for (const Node& n : rewritten.nodes) {
    if (n.op != "Mul") continue;
    EXPECT_EQ(rewritten.nodes[static_cast<size_t>(producers[static_cast<size_t>(n.inputs[0])])].op, "Unsqueeze");
  }
}

TEST(ProductSplit, ZooDinIsSplitAndScoresAsWithoutFusion) {
  std::string dir = testing::SourcePath("models/zoo/din");
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok());
  config->name = "din";
  auto split = Model::LoadFile(dir + "/1/model.onnx", *config);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  EXPECT_EQ((*split)->load_report().split_products, 1);
  EXPECT_EQ((*split)->load_report().unexpanded_broadcasts, 1);
  testing::ExpectZooScores(**split, "din", 1e-5);
  ModelOptions unfused;
  unfused.fusion = false;
  auto plain = Model::LoadFile(dir + "/1/model.onnx", *config, unfused);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ((*plain)->load_report().split_products, 0);
  testing::ExpectZooScores(**plain, "din", 1e-5);
}

}  // namespace
}  // namespace rankd
