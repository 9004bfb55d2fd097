// TensorFlow's weighted sparse lookups as tf2onnx writes them (compile/segment_bags.cc):
// `embedding_lookup_sparse(table, sp_ids, sp_weights, combiner)`, a weighted categorical column's
// lookup, built node for node (no TensorFlow here) in each spelling: the rows gathered and
// multiplied by a column of the weights, summed by the SegmentSum handler's grid, the mean and
// sqrt-n divided by a second segment sum of the weights (or of their squares) through DivNoNan.
// Each becomes one weighted EmbeddingBag over the padded ids and weights that scores as
// TensorFlow's combiners computed directly; forms over anything else are refused naming the node.
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <random>
#include <string>

#include "compile/compiled_model.h"
#include "compile/passes.h"
#include "model/config.h"
#include "model/onnx_import.h"
#include "serving/model.h"
#include "test_util.h"
#include "tf2onnx_graphs.h"
#include "tf_weighted_graphs.h"

namespace rankd {
namespace {

using testing::Expected;
using testing::Spelling;
using testing::WeightedGraph;

// Rows of 1 to 5 ids of 5 slots (-1 where empty, anywhere in the row) with weights in [0.25, 2]
// where an id is and, at the empty slots, 0 (own_indices: the weights' own entries are the ids')
// or a value no bag may read; row 3 empty; with `zero_sum`, row 5's weights 0.5 and -0.5 (a mean's
// divisor of 0, which DivNoNan makes zeros).
std::pair<Tensor, Tensor> Inputs(std::mt19937_64& rng, bool own_indices, bool zero_sum) {
  std::vector<int64_t> ids;
  std::vector<float> weights;
  for (int r = 0; r < 9; ++r) {
    for (int k = 0; k < 5; ++k) {
      const bool empty = r == 3 || (k != 2 && rng() % 3 == 0);
      ids.push_back(empty ? -1 : static_cast<int64_t>(rng() % 50));
      weights.push_back(empty ? (own_indices ? 0.0f : 7.0f) : 0.25f + static_cast<float>(rng() % 8) * 0.25f);
    }
  }
  if (zero_sum) {
    for (int k = 0; k < 5; ++k) ids[static_cast<size_t>(25 + k)] = k < 2 ? 4 + k : -1;
    for (int k = 0; k < 5; ++k)
      weights[static_cast<size_t>(25 + k)] = k == 0 ? 0.5f : k == 1 ? -0.5f : own_indices ? 0.0f : 3.0f;
  }
  return {testing::MakeI64({9, 5}, ids), testing::MakeF32({9, 5}, weights)};
}

void ExpectScoresAsTensorFlow(const Graph& g, const Tensor& table, const std::vector<Tensor>& inputs, const Tensor& ids,
                              const Tensor& weights, const std::string& combiner, const std::string& what,
                              bool pruned = false) {
  auto got = testing::RunGraph(g, inputs);
  ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
  const std::vector<float> want = Expected(table, ids, weights, combiner, pruned);
  ASSERT_EQ((*got)[0].size(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR((*got)[0].data<float>()[i], want[i], 1e-5) << what << " at " << i;
}

// Fuses `g` and checks it became one weighted bag (4 inputs) of `combiner`, the sparse tensors'
// sorting, counting and scattering gone, and the ops `also_gone`.
void ExpectOneWeightedBag(Graph& g, const std::string& combiner, std::initializer_list<const char*> also_gone,
                          const std::string& what) {
  auto fused = FuseSegmentBags(g);
  ASSERT_TRUE(fused.ok()) << what << ": " << fused.status().ToString();
  EXPECT_EQ(*fused, 1) << what;
  ASSERT_EQ(testing::CountOps(g, "EmbeddingBag"), 1) << what;
  for (const Node& n : g.nodes) {
    if (n.op == "EmbeddingBag") {
      EXPECT_EQ(n.NumInputs(), 4) << what << ": a weighted bag";
      EXPECT_EQ(n.GetString("mode", ""), combiner) << what;
    }
  }
  for (const char* gone : {"TopK", "NonZero", "ScatterND", "GatherND", "Unique"})
    EXPECT_EQ(testing::CountOps(g, gone), 0) << what << ": " << gone;
  for (const char* gone : also_gone) EXPECT_EQ(testing::CountOps(g, gone), 0) << what << ": " << gone;
}

TEST(SegmentWeightedBags, EverySpellingIsOneWeightedBagScoringAsTensorFlow) {
  std::mt19937_64 rng(21);
  const Tensor table = testing::RandomTable(DType::kF32, 50, 6, rng);
  int cases = 0;
  for (const char* combiner : {"sum", "mean", "sqrtn"}) {
    for (int form = 0; form < 16; ++form) {
      Spelling s;
      s.combiner = combiner;
      s.own_indices = form & 1;
      s.unsqueezed = form & 2;
      s.unique_rows = form & 4;
      s.counted = form & 8;
      // The division's spellings where there is one: a plain Div, Pow spelled as a product.
      s.div_no_nan = !(s.combiner != std::string("sum") && form % 3 == 0);
      s.squares_by_mul = form % 5 == 0;
      const std::string what = std::string(combiner) + (s.own_indices ? " own-indices" : " shared-indices") +
                               (s.unsqueezed ? " unsqueeze" : " reshape") + (s.unique_rows ? " unique" : "") +
                               (s.counted ? " counted" : " largest+1") + (s.div_no_nan ? "" : " div") +
                               (s.squares_by_mul ? " mul" : "");
      Graph g = WeightedGraph(table, s);
      ExpectOneWeightedBag(g, combiner, {"Div", "Where", "Sqrt"}, what);
      // The zero-sum row where a divisor of 0 gives zeros (DivNoNan; a plain Div gives NaN there).
      const auto [ids, weights] = Inputs(rng, s.own_indices, s.div_no_nan && s.combiner == std::string("mean"));
      ExpectScoresAsTensorFlow(g, table, {ids, weights}, ids, weights, combiner, what);
      ++cases;
    }
  }
  EXPECT_EQ(cases, 48);
}

// ids [9, 5] with -1 padding, other negative ids (dropped by the retain) and rows left empty
// (row 3, and row 8 whose ids are all dropped); weights in [-0.5, 2] with zeros where not
// `own_indices` (whose sparse tensor must keep the ids' entries: no zero where an id is), 0 at
// -1 slots for `own_indices` and 7 otherwise.
std::pair<Tensor, Tensor> SafeInputs(std::mt19937_64& rng, bool own_indices) {
  std::vector<int64_t> ids;
  std::vector<float> weights;
  for (int r = 0; r < 9; ++r) {
    for (int k = 0; k < 5; ++k) {
      const uint64_t pick = rng() % 5;
      const int64_t id = r == 3 || pick == 0 ? -1 : r == 8 || pick == 1 ? -3 : static_cast<int64_t>(rng() % 50);
      ids.push_back(id);
      float w = -0.5f + static_cast<float>(rng() % 11) * 0.25f;  // -0.5 to 2 in quarters, 0 among them
      if (own_indices && w == 0.0f) w = 1.0f;
      weights.push_back(id == -1 ? (own_indices ? 0.0f : 7.0f) : w);
    }
  }
  return {testing::MakeI64({9, 5}, ids), testing::MakeF32({9, 5}, weights)};
}

TEST(SegmentWeightedBags, SafeEmbeddingLookupSparseWithWeightsIsOneWeightedBag) {
  std::mt19937_64 rng(25);
  const Tensor table = testing::RandomTable(DType::kF32, 50, 6, rng);
  int cases = 0;
  for (const char* combiner : {"sum", "mean", "sqrtn"}) {
    for (int form = 0; form < 8; ++form) {
      Spelling s;
      s.combiner = combiner;
      s.safe = true;
      s.tf1 = form & 1;
      s.own_indices = form & 2;
      s.zeroed_by_where = form & 4;
      s.unique_rows = form % 3 != 0;
      const std::string what = std::string(combiner) + (s.tf1 ? " tf1" : " tf2") +
                               (s.own_indices ? " own-indices" : " shared-indices") +
                               (s.zeroed_by_where ? " where" : " add/mul") + (s.unique_rows ? " unique" : "");
      Graph g = WeightedGraph(table, s);
      ExpectOneWeightedBag(g, combiner, {"Compress", "Tile"}, what);
      EXPECT_EQ(testing::CountOps(g, "Greater"), s.Pruned() ? 1 : 0) << what << ": the weights <= 0 read as 0";
      const auto [ids, weights] = SafeInputs(rng, s.own_indices);
      ExpectScoresAsTensorFlow(g, table, {ids, weights}, ids, weights, combiner, what, s.Pruned());
      ++cases;
    }
  }
  EXPECT_EQ(cases, 24);
}

// An ONNX file of the form imports, and a load recognises it before checking the graph and scores
// it from padded ids and weights (served ragged: tests/ragged_weighted_bags_test.cc).
TEST(SegmentWeightedBags, AnOnnxFileImportsAndLoadsAsOneWeightedBag) {
  std::mt19937_64 rng(22);
  const Tensor table = testing::RandomTable(DType::kF32, 50, 4, rng);
  Spelling s;
  s.combiner = "sqrtn";
  Graph built = WeightedGraph(table, s);
  built.values[static_cast<size_t>(built.outputs[0])].name = "pooled";
  const std::string bytes = testing::AsOnnx(built);
  auto imported = ImportOnnxBytes(bytes.data(), bytes.size(), {});
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  auto config = ParseModelConfig(
      "name: tf_weighted\ninputs:\n  - name: ids\n    datatype: INT64\n    dims: [5]\n"
      "  - name: weights\n    datatype: FP32\n    dims: [5]\noutputs:\n  - name: pooled\n",
      true);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto compiled = CompiledModel::Compile(std::move(*imported), std::move(*config));
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  EXPECT_EQ((*compiled)->report().fused_segment_bags, 1);
  EXPECT_EQ(testing::CountOps((*compiled)->graph(), "TopK"), 0);
  // Rows of 3, 0 and 2 ids; 9 at the slots no bag reads.
  const Tensor ids = testing::MakeI64({3, 5}, {3, -1, 7, 7, -1, -1, -1, -1, -1, -1, 49, 0, -1, -1, -1});
  const Tensor weights = testing::MakeF32({3, 5}, {0.5f, 9, 2, 1.5f, 9, 9, 9, 9, 9, 9, 3, -1, 9, 9, 9});
  ExpectScoresAsTensorFlow((*compiled)->graph(), table, {ids, weights}, ids, weights, "sqrtn", "loaded");
}

// Loaded as a model on the CPU and on a GPU where there is one (the offsets' Range and product and
// the weighted bag on the device): random rows of ids and weights score as TensorFlow's combiner,
// and an id past the table fails its request.
TEST(SegmentWeightedBags, ALoadedModelScoresOnEachBackend) {
  std::mt19937_64 rng(24);
  const Tensor table = testing::RandomTable(DType::kF32, 40, 8, rng);
  // A sum, a mean, and safe_embedding_lookup_sparse's mean (its weights <= 0 dropped).
  for (const auto& [combiner, safe] : {std::pair{"sum", false}, std::pair{"mean", false}, std::pair{"mean", true}}) {
    Spelling s;
    s.combiner = combiner;
    s.safe = safe;
    s.own_indices = true;
    Graph built = WeightedGraph(table, s);
    built.values[static_cast<size_t>(built.outputs[0])].name = "pooled";
    const std::string path = testing::WriteTempFile(
        std::string("tf_weighted_") + combiner + (safe ? "_safe" : "") + ".onnx", testing::AsOnnx(built));
    for (const Backend* backend : {&CpuBackend(), testing::CudaOrNull()}) {
      if (!backend) continue;
      SCOPED_TRACE(std::string(combiner) + (safe ? " safe" : "") + " on " + backend->name());
      auto config = ParseModelConfig(
          "name: tf_weighted\ninputs:\n  - name: ids\n    datatype: INT64\n    dims: [4]\n"
          "  - name: weights\n    datatype: FP32\n    dims: [4]\noutputs:\n  - name: pooled\n",
          true);
      ASSERT_TRUE(config.ok()) << config.status().ToString();
      ModelOptions options;
      options.backend = backend;
      auto model = Model::LoadFile(path, std::move(*config), options);
      ASSERT_TRUE(model.ok()) << model.status().ToString();
      for (int64_t rows : {1, 7, 300}) {
        std::vector<int64_t> ids;
        std::vector<float> weights;
        for (int64_t i = 0; i < rows * 4; ++i) {
          const bool empty = i % 4 != 0 && rng() % 4 == 0;  // every row has an id (largest + 1 segments)
          ids.push_back(empty ? -1 : static_cast<int64_t>(rng() % 40));
          // Some weights <= 0 for the safe lookup to drop (none 0 where an id is: own_indices).
          const float w = (safe ? -0.5f : 0.125f) + static_cast<float>(rng() % 16) * 0.125f;
          weights.push_back(empty ? 0.0f : w == 0.0f ? 1.0f : w);
        }
        const Tensor id_tensor = testing::MakeI64({rows, 4}, ids), weight_tensor = testing::MakeF32({rows, 4}, weights);
        InferRequest r;
        r.inputs.push_back({"ids", id_tensor, {}, {}});
        r.inputs.push_back({"weights", weight_tensor, {}, {}});
        auto out = (*model)->Infer(r);
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        const std::vector<float> want = Expected(table, id_tensor, weight_tensor, combiner, s.Pruned());
        ASSERT_EQ((*out)[0].data.size(), static_cast<int64_t>(want.size()));
        for (size_t i = 0; i < want.size(); ++i)
          EXPECT_NEAR((*out)[0].data.data<float>()[i], want[i], 1e-5) << rows << " rows, at " << i;
      }
      InferRequest bad;
      bad.inputs.push_back({"ids", testing::MakeI64({1, 4}, {0, 1, 40, -1}), {}, {}});
      bad.inputs.push_back({"weights", testing::MakeF32({1, 4}, {1, 1, 1, 0}), {}, {}});
      EXPECT_EQ((*model)->Infer(bad).status().code(), StatusCode::kInvalidArgument);
    }
  }
}

// Weights that are not a padded input's entries at the ids' own, and rows weighted by anything but
// a column of weights, are refused at load naming the segment sum.
TEST(SegmentWeightedBags, OtherWeightingsAreRefusedNamingTheNode) {
  std::mt19937_64 rng(23);
  const Tensor table = testing::RandomTable(DType::kF32, 20, 4, rng);
  Spelling from_input;
  from_input.weights_from_input = true;
  Graph g = WeightedGraph(table, from_input);
  auto fused = FuseSegmentBags(g);
  ASSERT_FALSE(fused.ok());
  EXPECT_EQ(fused.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(fused.status().message().find("ReduceSum"), std::string::npos) << fused.status().message();
  EXPECT_NE(fused.status().message().find("padded weights input"), std::string::npos) << fused.status().message();

  // Rows times a [T, 2] matrix rather than a column: not a weighting rankd knows.
  Spelling plain;
  Graph h = WeightedGraph(table, plain);
  for (Node& n : h.nodes) {
    if (n.op == "Concat" && n.NumInputs() == 2 && h.FindConstant(n.inputs[1])) {
      n.inputs[1] = h.AddConstant("twos", testing::MakeI64({1}, {2}));
    }
  }
  auto refused = FuseSegmentBags(h);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("not a Gather of a constant table"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace rankd
