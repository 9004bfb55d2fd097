// FuseEmbeddingConcats and ConcatEmbeddingBags on the CPU: random concatenations of bags (ragged
// and padded ids, sum and mean, weighted sums, FP32/FP16/BF16 tables, empty bags, -1 slots) and copied parts
// score exactly as the graph as written; what must stay unfused stays.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "compile/passes.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::GraphBuilder;
using testing::RandomTable;
using testing::RunGraph;

// A bag over `rows` request rows: ragged (values + offsets inputs, perhaps a weighted sum) or
// padded ids; its output id.
int AddBag(GraphBuilder& g, std::vector<Tensor>& inputs, int64_t rows, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> pick(0, 5);
  const DType dtypes[] = {DType::kF32, DType::kF16, DType::kBF16};
  const int64_t dims[] = {1, 3, 4, 8, 16, 128};
  DType dtype = dtypes[pick(rng) % 3];
  int64_t dim = dims[pick(rng)], table_rows = 1 + pick(rng) * 7, max_len = 1 + pick(rng);
  std::uniform_int_distribution<int64_t> id(-1, table_rows - 1), len(0, max_len);
  int table = g.Const("table" + std::to_string(inputs.size()), RandomTable(dtype, table_rows, dim, rng));
  std::map<std::string, AttributeValue> attrs{{"mode", std::string(pick(rng) < 2 ? "mean" : "sum")}};
  std::string name = "ids" + std::to_string(inputs.size());
  if (pick(rng) < 3) {
    std::vector<int64_t> values, offsets{0};
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t n = len(rng); n > 0; --n) values.push_back(id(rng));
      offsets.push_back(static_cast<int64_t>(values.size()));
    }
    inputs.push_back(testing::MakeI64({static_cast<int64_t>(values.size())}, values));
    inputs.push_back(testing::MakeI64({rows + 1}, offsets));
    int v = g.Input(name + ".values", DType::kI64, {-1});
    int o = g.Input(name + ".offsets", DType::kI64, {-1});
    if (pick(rng) < 2) {  // a weighted sum, a weight per id (some zero, some negative)
      std::vector<float> weights(values.size());
      for (float& w : weights) w = static_cast<float>(pick(rng)) - 1.5f;
      inputs.push_back(testing::MakeF32({static_cast<int64_t>(weights.size())}, weights));
      const int w = g.Input(name + ".weights", DType::kF32, {-1});
      return g.Op("EmbeddingBag", {table, v, o, w}, {{"mode", std::string("sum")}});
    }
    return g.Op("EmbeddingBag", {table, v, o}, attrs);
  }
  std::vector<int64_t> padded(static_cast<size_t>(rows * max_len));
  for (int64_t& v : padded) v = id(rng);
  inputs.push_back(testing::MakeI64({rows, max_len}, padded));
  return g.Op("EmbeddingBag", {table, g.Input(name, DType::kI64, {-1, max_len})}, attrs);
}

// Gather(table, Gather(ids, c, axis=1)) as an exported per-column lookup writes it (MMoE, DIN's
// profile): ids [rows, width] with negative ids counting from the table's end; `c` may be negative.
// Or, one time in three, Gather(table, ids [rows]) (DIN's candidate item), with `whole` set.
int AddLookup(GraphBuilder& g, std::vector<Tensor>& inputs, int64_t rows, std::mt19937_64& rng, int& ids_input,
              bool& whole) {
  std::uniform_int_distribution<int> pick(0, 5);
  const int64_t table_rows = 11, dim = 1 + pick(rng) * 3;  // every lookup reads ids in [-11, 11)
  int table = g.Const("lookup_table" + std::to_string(inputs.size()), RandomTable(DType::kF32, table_rows, dim, rng));
  whole = pick(rng) < 2;
  if (whole) {
    std::uniform_int_distribution<int64_t> id(-table_rows, table_rows - 1);
    std::vector<int64_t> ids(static_cast<size_t>(rows));
    for (int64_t& v : ids) v = id(rng);
    inputs.push_back(testing::MakeI64({rows}, ids));
    return g.Op("Gather", {table, g.Input("whole_ids" + std::to_string(inputs.size()), DType::kI64, {-1})});
  }
  if (ids_input < 0 || pick(rng) < 2) {  // a new ids input, or a column of the last one
    std::uniform_int_distribution<int64_t> id(-table_rows, table_rows - 1);
    std::vector<int64_t> ids(static_cast<size_t>(rows * 6));
    for (int64_t& v : ids) v = id(rng);
    inputs.push_back(testing::MakeI64({rows, 6}, ids));
    ids_input = g.Input("lookup_ids" + std::to_string(inputs.size()), DType::kI64, {-1, 6});
  }
  int64_t c = std::uniform_int_distribution<int64_t>(-6, 5)(rng);
  int column = g.Op(
      "Gather",
      {ids_input, g.Const("c" + std::to_string(inputs.size()) + "_" + std::to_string(c) + std::to_string(pick(rng)),
                          testing::MakeI64({}, {c}))},
      {{"axis", int64_t{1}}});
  return g.Op("Gather", {table, column});
}

TEST(EmbeddingConcatFusion, RandomConcatenationsScoreExactlyAsWritten) {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> coin(0, 3);
    int64_t rows = 1 + coin(rng) * 5;
    GraphBuilder g;
    std::vector<Tensor> inputs;
    std::vector<int> parts;
    int bags = 1 + coin(rng) + coin(rng), read_elsewhere = -1;
    for (int b = 0; b < bags; ++b) parts.push_back(AddBag(g, inputs, rows, rng));
    const std::vector<int> bag_values = parts;
    int ids_input = -1;
    std::vector<int> lookup_values, whole_values;
    for (int l = coin(rng); l > 0; --l) {  // column and whole-id lookups: fused as parts of their own
      bool whole = false;
      lookup_values.push_back(AddLookup(g, inputs, rows, rng, ids_input, whole));
      if (whole) whole_values.push_back(lookup_values.back());
      parts.push_back(lookup_values.back());
    }
    if (coin(rng) == 0) read_elsewhere = parts[0];  // also a graph output: it must stay a bag
    for (int d = coin(rng) % 3; d > 0; --d) {       // copied parts: an input and a computed value
      int64_t width = 1 + coin(rng) * 3;
      std::vector<float> x(static_cast<size_t>(rows * width));
      for (float& v : x) v = static_cast<float>(coin(rng)) - 1.5f;
      inputs.push_back(testing::MakeF32({rows, width}, x));
      int in = g.Input("x" + std::to_string(inputs.size()), DType::kF32, {-1, width});
      parts.push_back(coin(rng) < 2 ? in : g.Op("Relu", {in}));
    }
    if (coin(rng) == 0) parts.push_back(parts[1 % parts.size()]);  // a part twice: copied, not pooled
    std::shuffle(parts.begin(), parts.end(), rng);
    int64_t axis = coin(rng) < 2 ? 1 : -1;
    g.Output(g.Op("Concat", parts, {{"axis", axis}}));
    if (read_elsewhere >= 0) g.Output(read_elsewhere);
    Graph graph = g.graph();
    auto before = RunGraph(graph, inputs);
    ASSERT_TRUE(before.ok()) << "seed " << seed << ": " << before.status().ToString();
    // A bag or lookup read only once, by the concatenation, goes into it; the others stay.
    auto taken = [&](int v) { return std::count(parts.begin(), parts.end(), v) == 1 && v != read_elsewhere; };
    int pooled = static_cast<int>(std::count_if(bag_values.begin(), bag_values.end(), taken));
    int looked_up = static_cast<int>(std::count_if(lookup_values.begin(), lookup_values.end(), taken));
    int wholes = static_cast<int>(whole_values.size());
    int wholes_taken = static_cast<int>(std::count_if(whole_values.begin(), whole_values.end(), taken));
    int columns = static_cast<int>(lookup_values.size()) - wholes, columns_taken = looked_up - wholes_taken;
    EXPECT_EQ(FuseEmbeddingConcats(graph), pooled + looked_up > 0 ? 1 : 0) << "seed " << seed;
    EXPECT_EQ(graph.OpCounts()["Concat"], pooled + looked_up > 0 ? 0 : 1);
    EXPECT_EQ(graph.OpCounts()["EmbeddingBag"], bags - pooled) << "seed " << seed;
    // A column lookup is two Gathers; a whole-id one is one, which becomes a view of its ids.
    EXPECT_EQ(graph.OpCounts()["Gather"], 2 * (columns - columns_taken) + (wholes - wholes_taken)) << "seed " << seed;
    EXPECT_EQ(graph.OpCounts()["Unsqueeze"], wholes_taken) << "seed " << seed;
    auto after = RunGraph(graph, inputs);
    ASSERT_TRUE(after.ok()) << "seed " << seed << ": " << after.status().ToString();
    ASSERT_EQ(after->size(), before->size());
    for (size_t o = 0; o < before->size(); ++o) {
      ASSERT_EQ((*after)[o].shape(), (*before)[o].shape()) << "seed " << seed;
      EXPECT_EQ(testing::RelativeError((*after)[o], (*before)[o]), 0.0) << "seed " << seed << " output " << o;
    }
  }
}

TEST(EmbeddingConcatFusion, LeavesOtherConcatenationsAlone) {
  std::mt19937_64 rng(7);
  GraphBuilder g;
  std::vector<Tensor> inputs;
  int a = AddBag(g, inputs, 4, rng), b = AddBag(g, inputs, 4, rng);
  int x = g.Input("x", DType::kF32, {-1, 3}), y = g.Input("y", DType::kF32, {-1, 3});
  g.Output(g.Op("Concat", {a, b}, {{"axis", int64_t{0}}}));  // along the rows: not a row's columns
  g.Output(g.Op("Concat", {x, y}, {{"axis", int64_t{1}}}));  // no bag among the parts
  EXPECT_EQ(FuseEmbeddingConcats(g.graph()), 0);
  EXPECT_EQ(g.graph().OpCounts()["EmbeddingBag"], 2);
}

TEST(EmbeddingConcatFusion, LookupsKeepGathersRules) {
  // ids counting from the end are read as Gather reads them; one past either end is an error; a
  // column counted from the end is taken only when the ids' width is declared.
  auto build = [](int64_t declared_width) {
    GraphBuilder g;
    int table = g.Const("table", testing::MakeF32({3, 1}, {10, 20, 30}));
    int ids = g.Input("ids", DType::kI64, {-1, declared_width});
    auto column = [&](const char* name, int64_t c) {
      return g.Op("Gather",
                  {table, g.Op("Gather", {ids, g.Const(name, testing::MakeI64({}, {c}))}, {{"axis", int64_t{1}}})});
    };
    g.Output(g.Op("Concat", {column("one", 1), column("zero", 0), column("minus_one", -1)}, {{"axis", int64_t{-1}}}));
    return g.graph();
  };
  Graph written = build(2), unknown_width = build(-1), fused = build(2);
  ASSERT_EQ(FuseEmbeddingConcats(unknown_width), 1);
  EXPECT_EQ(unknown_width.OpCounts()["Gather"], 2);  // column -1 of an unknown width stays as written
  ASSERT_EQ(FuseEmbeddingConcats(fused), 1);
  EXPECT_EQ(fused.nodes.size(), 1u);
  Tensor in = testing::MakeI64({2, 2}, {0, -1, 2, -3});
  auto want = RunGraph(written, {in});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (const Graph* g : {&fused, &unknown_width}) {
    auto got = RunGraph(*g, {in});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(testing::RelativeError((*got)[0], (*want)[0]), 0.0);
    EXPECT_EQ((*got)[0].data<float>()[0], 30.0f);  // ids[0, 1] = -1: the last row
  }
  for (int64_t bad : {3, -4}) {
    auto refused = RunGraph(fused, {testing::MakeI64({1, 2}, {0, bad})});
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

// Gather(table, ids [rows]) as a part: negative ids count from the table's end, one past either end
// is an error, as Gather has them; a Gather of ids of another rank stays as written.
TEST(EmbeddingConcatFusion, WholeIdLookupsKeepGathersRules) {
  auto build = [](Shape ids_shape) {
    GraphBuilder g;
    int table = g.Const("table", testing::MakeF32({3, 2}, {10, 11, 20, 21, 30, 31}));
    int ids = g.Input("ids", DType::kI64, ids_shape);
    int x = g.Input("x", DType::kF32, {-1, 1});
    g.Output(g.Op("Concat", {g.Op("Gather", {table, ids}), x}, {{"axis", int64_t{-1}}}));
    return g.graph();
  };
  Graph written = build({-1}), fused = build({-1}), rank2 = build({-1, 1});
  ASSERT_EQ(FuseEmbeddingConcats(fused), 1);
  EXPECT_EQ(fused.OpCounts()["ConcatEmbeddingBags"], 1);
  EXPECT_EQ(fused.OpCounts()["Unsqueeze"], 1);
  EXPECT_EQ(fused.OpCounts()["Gather"], 0);
  EXPECT_EQ(FuseEmbeddingConcats(rank2), 0);  // [rows, 1, 2] rows: not a row's columns
  const std::vector<Tensor> in{testing::MakeI64({3}, {2, -1, -3}), testing::MakeF32({3, 1}, {1, 2, 3})};
  auto want = RunGraph(written, in);
  auto got = RunGraph(fused, in);
  ASSERT_TRUE(want.ok() && got.ok()) << want.status().ToString() << got.status().ToString();
  EXPECT_EQ(testing::RelativeError((*got)[0], (*want)[0]), 0.0);
  EXPECT_EQ((*got)[0].data<float>()[3], 30.0f);  // id -1: the last row
  EXPECT_EQ((*got)[0].data<float>()[6], 10.0f);  // id -3: the first
  for (int64_t bad : {3, -4}) {
    auto refused = RunGraph(fused, {testing::MakeI64({1}, {bad}), testing::MakeF32({1, 1}, {0})});
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

// Concat(Gather(ta, Clip(a, 0)), Gather(tb, b), last axis) over ids [users, L] (W2's user
// sequence): one ConcatEmbeddingBags over the ids viewed as [users * L, 1], the Clip kept as its
// part's floor; on the CPU and the GPU the same bits as the graph as written, empty sequences
// included; an id below the floor reads the floor's row, a negative unclipped one counts from the
// end, and one out of range is an error. A Clip with a ceiling stays a Clip.
TEST(EmbeddingConcatFusion, SequenceLookupsAreOneLookupWithTheirClips) {
  std::mt19937_64 rng(17);
  const Tensor ta = testing::RandomF32({7, 8}, rng), tb = testing::RandomF32({5, 4}, rng);
  auto build = [&](bool ceiling) {
    GraphBuilder g;
    int a = g.Input("a", DType::kI64, {-1, -1});
    int b = g.Input("b", DType::kI64, {-1, -1});
    int zero = g.Const("zero", Tensor::FromVector<int64_t>(DType::kI64, {}, {0}));
    std::vector<int> clip_in{a, zero};
    if (ceiling) clip_in.push_back(g.Const("three", Tensor::FromVector<int64_t>(DType::kI64, {}, {3})));
    int clipped = g.Op("Clip", clip_in);
    g.graph().values[static_cast<size_t>(clipped)] = {"clipped", DType::kI64, {-1, -1}, true};  // as ONNX infers it
    int la = g.Op("Gather", {g.Const("ta", ta), clipped});
    int lb = g.Op("Gather", {g.Const("tb", tb), b});
    g.Output(g.Op("Concat", {la, lb}, {{"axis", int64_t{-1}}}));
    return g.graph();
  };
  const Backend* cuda = testing::CudaOrNull();
  for (bool ceiling : {false, true}) {
    Graph written = build(ceiling), fused = build(ceiling);
    ASSERT_EQ(FuseEmbeddingConcats(fused), 1);
    EXPECT_EQ(fused.OpCounts()["ConcatEmbeddingBags"], 1);
    EXPECT_EQ(fused.OpCounts()["Gather"], 0);
    EXPECT_EQ(fused.OpCounts()["Clip"], ceiling ? 1 : 0);
    for (auto [users, length] : {std::pair<int64_t, int64_t>{1, 0}, {1, 1}, {3, 5}, {2, 40}}) {
      std::vector<int64_t> a(static_cast<size_t>(users * length)), b(a.size());
      for (int64_t& id : a) id = static_cast<int64_t>(rng() % 10) - 3;  // [-3, 6]: below the floor too
      for (int64_t& id : b) id = static_cast<int64_t>(rng() % 10) - 5;  // [-5, 4]: negatives count from the end
      const std::vector<Tensor> in{testing::MakeI64({users, length}, a), testing::MakeI64({users, length}, b)};
      auto want = RunGraph(written, in);
      auto got = RunGraph(fused, in);
      ASSERT_TRUE(want.ok() && got.ok()) << want.status().ToString() << got.status().ToString();
      ASSERT_EQ((*got)[0].shape(), Shape({users, length, 12}));
      EXPECT_EQ(testing::RelativeError((*got)[0], (*want)[0]), 0.0) << users << " x " << length;
      if (cuda) {
        auto on_gpu = RunGraph(fused, in, {}, *cuda);
        ASSERT_TRUE(on_gpu.ok()) << on_gpu.status().ToString();
        EXPECT_EQ(testing::RelativeError((*on_gpu)[0], (*want)[0]), 0.0) << "cuda, " << users << " x " << length;
      }
    }
    for (auto [a, b] : {std::pair<int64_t, int64_t>{7, 0}, {0, 5}, {0, -6}}) {  // past ta, past tb, before tb
      if (ceiling && a == 7) continue;                                          // clipped to 3
      const std::vector<Tensor> in{testing::MakeI64({1, 1}, {a}), testing::MakeI64({1, 1}, {b})};
      EXPECT_EQ(RunGraph(fused, in).status().code(), StatusCode::kInvalidArgument) << a << ", " << b;
      if (cuda) {
        EXPECT_EQ(RunGraph(fused, in, {}, *cuda).status().code(), StatusCode::kInvalidArgument)
            << "cuda, " << a << ", " << b;
      }
    }
    auto clipped = RunGraph(fused, {testing::MakeI64({1, 1}, {-100}), testing::MakeI64({1, 1}, {0})});
    ASSERT_TRUE(clipped.ok()) << clipped.status().ToString();
    EXPECT_EQ((*clipped)[0].data<float>()[0], ta.data<float>()[0]);  // -100 reads row 0
  }
}

TEST(ConcatEmbeddingBags, BadIdsAndMalformedNodesAreErrors) {
  GraphBuilder g;
  int table = g.Const("table", testing::MakeF32({2, 2}, {1, 2, 3, 4}));
  int ids = g.Input("ids", DType::kI64, {-1, 2});
  int x = g.Input("x", DType::kF32, {-1, 1});
  g.Output(g.Op("ConcatEmbeddingBags", {x, table, ids},
                {{"parts", std::vector<int64_t>{1, 2}}, {"modes", std::vector<int64_t>{0, 0}}}));
  // Inputs in graph order: ids, x.
  auto good = RunGraph(g.graph(), {testing::MakeI64({1, 2}, {1, -1}), testing::MakeF32({1, 1}, {9})});
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ((*good)[0].shape(), Shape({1, 3}));
  EXPECT_EQ((*good)[0].data<float>()[0], 9.0f);
  EXPECT_EQ((*good)[0].data<float>()[2], 4.0f);
  auto bad = RunGraph(g.graph(), {testing::MakeI64({1, 2}, {2, 0}), testing::MakeF32({1, 1}, {9})});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("out of range"), std::string::npos) << bad.status().ToString();
  auto rows_differ = RunGraph(g.graph(), {testing::MakeI64({1, 2}, {1, 0}), testing::MakeF32({2, 1}, {9, 8})});
  EXPECT_EQ(rows_differ.status().code(), StatusCode::kInvalidArgument);
  g.graph().nodes[0].attrs["floors"] = std::vector<int64_t>{0, 0};  // a floor on parts reading no column
  Status floored = CpuBackend().CheckGraph(g.graph());              // as a model's load checks it
  EXPECT_EQ(floored.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(floored.message().find("floor"), std::string::npos) << floored.ToString();
  g.graph().nodes[0].attrs.erase("floors");
  g.graph().nodes[0].attrs["parts"] = std::vector<int64_t>{1, 1};  // does not account for every input
  auto malformed = RunGraph(g.graph(), {testing::MakeI64({1, 2}, {1, 0}), testing::MakeF32({1, 1}, {9})});
  EXPECT_EQ(malformed.status().code(), StatusCode::kInvalidArgument);
}

// A weighted part (table, values, offsets, weights): a sum, each row times its weight, as the
// weighted EmbeddingBag gives it; fewer weights than ids fail the request; a weighted part that is
// not a sum, or reads a column, is refused at load.
TEST(ConcatEmbeddingBags, WeightedPartsAreSums) {
  GraphBuilder g;
  const int table = g.Const("table", testing::MakeF32({3, 2}, {1, 2, 3, 4, 5, 6}));
  const int v = g.Input("v", DType::kI64, {-1}), o = g.Input("o", DType::kI64, {-1});
  const int w = g.Input("w", DType::kF32, {-1});
  g.Output(g.Op("ConcatEmbeddingBags", {table, v, o, w},
                {{"parts", std::vector<int64_t>{4}}, {"modes", std::vector<int64_t>{0}}}));
  ASSERT_TRUE(CpuBackend().CheckGraph(g.graph()).ok());
  // Bags {0, 2}, {}, {-1, 1}: 0.5 * row 0 + 2 * row 2; zeros; -1 skipped, -3 * row 1.
  const Tensor ids = testing::MakeI64({4}, {0, 2, -1, 1}), offsets = testing::MakeI64({4}, {0, 2, 2, 4});
  auto got = RunGraph(g.graph(), {ids, offsets, testing::MakeF32({4}, {0.5f, 2.0f, 100.0f, -3.0f})});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(testing::RelativeError((*got)[0], testing::MakeF32({3, 2}, {10.5f, 13.0f, 0, 0, -9.0f, -12.0f})), 0.0);
  auto cut = RunGraph(g.graph(), {ids, offsets, testing::MakeF32({3}, {1, 1, 1})});
  EXPECT_EQ(cut.status().code(), StatusCode::kInvalidArgument) << cut.status().ToString();
  g.graph().nodes[0].attrs["modes"] = std::vector<int64_t>{1};
  const Status mean = CpuBackend().CheckGraph(g.graph());
  EXPECT_EQ(mean.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mean.message().find("a weighted part"), std::string::npos) << mean.ToString();
}

}  // namespace
}  // namespace rankd
