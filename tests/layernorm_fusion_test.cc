// FuseDecomposedLayerNorms: layer norms written out op by op (PyTorch below opset 17) become one
// LayerNormalization and score the same on random inputs, in every operand order and with either
// square; near misses stay as written; BST exported at opset 13 loads as the opset-17 export does.
#include <gtest/gtest.h>

#include <random>

#include "compile/passes.h"
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

struct Variant {
  bool square_by_mul = false;  // d * d instead of Pow(d, 2)
  bool swapped = false;        // constants on the left of Add and Mul
  bool axes_input = false;     // ReduceMean's axes as a constant input (opset 18)
  int64_t axis = -1;
  bool extra_reader = false;  // d is also a graph output
  bool gamma_input = false;   // gamma a graph input, not a constant
};

// x [rows, h] -> the decomposed layer norm of `v`.
Graph Decomposed(int64_t h, const Variant& v, std::mt19937_64& rng) {
  GraphBuilder b;
  int x = b.Input("x", DType::kF32, {-1, h});
  auto mean = [&](int in) {
    if (v.axes_input) return b.Op("ReduceMean", {in, b.Const("axes" + std::to_string(in), MakeI64({1}, {v.axis}))});
    return b.Op("ReduceMean", {in}, {{"axes", std::vector<int64_t>{v.axis}}});
  };
  auto binary = [&](const char* op, int value, int constant) {
    return v.swapped ? b.Op(op, {constant, value}) : b.Op(op, {value, constant});
  };
  int d = b.Op("Sub", {x, mean(x)});
  int square = v.square_by_mul ? b.Op("Mul", {d, d}) : b.Op("Pow", {d, b.Const("two", MakeF32({}, {2.0f}))});
  int var = binary("Add", mean(square), b.Const("eps", MakeF32({}, {1e-5f})));
  int normed = b.Op("Div", {d, b.Op("Sqrt", {var})});
  int gamma = v.gamma_input ? b.Input("gamma", DType::kF32, {h}) : b.Const("gamma", RandomF32({h}, rng, -3, 3));
  int y = binary("Add", binary("Mul", normed, gamma), b.Const("beta", RandomF32({h}, rng, -3, 3)));
  b.Output(y);
  if (v.extra_reader) b.Output(d);
  return std::move(b.graph());
}

TEST(LayerNormFusion, EveryWrittenOutFormBecomesOneNodeAndScoresTheSame) {
  std::mt19937_64 rng(11);
  int checked = 0;
  for (bool by_mul : {false, true}) {
    for (bool swapped : {false, true}) {
      for (bool axes_input : {false, true}) {
        for (int64_t h : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{129}}) {
          Variant v{by_mul, swapped, axes_input};
          Graph written = Decomposed(h, v, rng);
          Graph fused = written;
          ASSERT_EQ(FuseDecomposedLayerNorms(fused), 1) << by_mul << swapped << axes_input << h;
          ASSERT_EQ(fused.nodes.size(), 1u);
          EXPECT_EQ(fused.nodes[0].op, "LayerNormalization");
          EXPECT_FLOAT_EQ(fused.nodes[0].GetFloat("epsilon", 0), 1e-5f);
          for (int64_t rows : {int64_t{1}, int64_t{33}}) {
            std::vector<Tensor> in = {RandomF32({rows, h}, rng, -3, 3)};
            auto want = RunGraph(written, in);
            auto got = RunGraph(fused, in);
            ASSERT_TRUE(want.ok() && got.ok()) << (got.ok() ? want.status() : got.status()).ToString();
            EXPECT_LE(testing::RelativeError((*got)[0], (*want)[0]), 1e-5) << "h " << h;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 64);
}

TEST(LayerNormFusion, NearMissesStayAsWritten) {
  std::mt19937_64 rng(3);
  Variant other_axis;
  other_axis.axis = 0;  // a norm over the rows is not a layer norm
  Variant shared;
  shared.extra_reader = true;  // the centred value is needed elsewhere
  Variant runtime_gamma;
  runtime_gamma.gamma_input = true;
  for (const Variant& v : {other_axis, shared, runtime_gamma}) {
    Graph g = Decomposed(8, v, rng);
    size_t before = g.nodes.size();
    EXPECT_EQ(FuseDecomposedLayerNorms(g), 0);
    EXPECT_EQ(g.nodes.size(), before);
    EXPECT_EQ(CountOps(g, "LayerNormalization"), 0);
  }
}

// The pass runs before a model's nodes are checked (serving/model.cc): a node of the pattern short
// of inputs, as a fuzzed model had, matches nothing (and is read within its inputs: ASan checks).
TEST(LayerNormFusion, NodesShortOfInputsMatchNothing) {
  std::mt19937_64 rng(5);
  for (bool by_mul : {false, true}) {
    Variant v;
    v.square_by_mul = by_mul;
    const Graph written = Decomposed(8, v, rng);
    for (size_t n = 0; n < written.nodes.size(); ++n) {
      for (size_t keep = 0; keep < written.nodes[n].inputs.size(); ++keep) {
        Graph g = written;
        g.nodes[n].inputs.resize(keep);
        EXPECT_EQ(FuseDecomposedLayerNorms(g), 0) << g.nodes[n].op << " with " << keep << " inputs";
      }
    }
  }
}

TEST(LayerNormFusion, BstAtOpset13LoadsAsAtOpset17AndScoresAsPyTorch) {
  auto old_export = Model::Load(testing::SourcePath("models/zoo/bst_opset13"), -1);
  auto new_export = Model::Load(testing::SourcePath("models/zoo/bst"), -1);
  ASSERT_TRUE(old_export.ok()) << old_export.status().ToString();
  ASSERT_TRUE(new_export.ok()) << new_export.status().ToString();
  EXPECT_EQ((*old_export)->load_report().fused_layer_norms, 4);
  EXPECT_EQ((*old_export)->graph().OpCounts(), (*new_export)->graph().OpCounts());
  testing::ExpectZooScores(**old_export, "bst_opset13", 1e-5);
}

}  // namespace
}  // namespace rankd
