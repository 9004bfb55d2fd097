// DLRM's dot interaction fused into DotInteraction (FuseDotInteractions) and its kernels: random
// interactions in both export forms (the flat gather, torch.onnx's advanced indexing), with or
// without the dense part concatenated in front, over the lower triangle, the upper one with its
// diagonal or a list with repeats and negative positions, score the same fused as written on the
// CPU, and on CUDA as on the CPU (fields in shared memory, past what it holds, few and many rows);
// what must not fuse does not; bad pairs are refused when planned; the zoo's DLRM fuses its
// interaction and scores as PyTorch.
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
using testing::MakeI64;
using testing::RandomF32;

constexpr int64_t kProbeRows = 7;

enum class Positions { kLower, kUpperWithDiagonal, kAnyWithNegatives };
enum class Form { kFlatReshape, kFlatFlatten, kIndexed };

struct Spec {
  int64_t fields = 5, dim = 4;
  Positions positions = Positions::kLower;
  Form form = Form::kIndexed;
  int64_t dense = 0;                 // width of the dense part concatenated in front (0: none)
  bool positions_computed = true;    // indexed form: li * F + lj built from Shape, as torch.onnx does
  bool positions_from_rows = false;  // indexed form: the positions moved by the rows (a probe's
                                     // value would not hold at other row counts)
  // What must not fuse:
  bool other_operand = false;  // MatMul(T, Transpose(U))
  bool products_out = false;   // Z is also a graph output
  int64_t gather_axis = -1;    // -1: the form's own axis
};

std::vector<int64_t> PositionList(const Spec& s, std::mt19937_64& rng) {
  std::vector<int64_t> p;
  const int64_t f = s.fields;
  for (int64_t i = 0; i < f; ++i) {
    for (int64_t j = 0; j < f; ++j) {
      if (s.positions == Positions::kLower && j < i) p.push_back(i * f + j);
      if (s.positions == Positions::kUpperWithDiagonal && j >= i) p.push_back(i * f + j);
    }
  }
  if (s.positions == Positions::kAnyWithNegatives) {
    for (int k = 0; k < 2 * f + 3; ++k) p.push_back(std::uniform_int_distribution<int64_t>(-f * f, f * f - 1)(rng));
  }
  return p;
}

// Inputs: "t" [rows, F, D] (and "u" for other_operand), "dense" [rows, W] when dense > 0.
Graph InteractionGraph(const Spec& s, std::mt19937_64& rng) {
  GraphBuilder b;
  auto ints = [&](std::vector<int64_t> v) { return b.Const("c", MakeI64({static_cast<int64_t>(v.size())}, v)); };
  const int t = b.Input("t", DType::kF32, {-1, s.fields, s.dim});
  const int u = s.other_operand ? b.Input("u", DType::kF32, {-1, s.fields, s.dim}) : t;
  const int dense = s.dense > 0 ? b.Input("dense", DType::kF32, {-1, s.dense}) : -1;
  const int z = b.Op("MatMul", {t, b.Op("Transpose", {u}, {{"perm", std::vector<int64_t>{0, 2, 1}}})});
  if (s.products_out) b.Output(z);
  const std::vector<int64_t> list = PositionList(s, rng);
  int picked = -1;
  if (s.form == Form::kIndexed) {
    const int flat =
        b.Op("Flatten", {b.Op("Transpose", {z}, {{"perm", std::vector<int64_t>{1, 2, 0}}})}, {{"axis", int64_t{2}}});
    int positions = ints(list);
    if (s.positions_computed) {  // li * F + lj with F from Shape(Z), as torch.onnx writes it
      std::vector<int64_t> li, lj;
      for (int64_t e : list) {
        const int64_t w = e < 0 ? e + s.fields * s.fields : e;
        li.push_back(w / s.fields), lj.push_back(w % s.fields);
      }
      const int f = b.Op("Gather", {b.Op("Shape", {z}), b.Const("two", MakeI64({}, {2}))}, {{"axis", int64_t{0}}});
      positions = b.Op("Add", {ints(lj), b.Op("Mul", {ints(li), f})});
    }
    if (s.positions_from_rows) {  // list - 7 + rows: the list at the probe's 7 rows only
      std::vector<int64_t> base;
      for (int64_t e : list) base.push_back(e - kProbeRows);
      const int rows = b.Op("Gather", {b.Op("Shape", {z}), b.Const("zero", MakeI64({}, {0}))}, {{"axis", int64_t{0}}});
      positions = b.Op("Add", {ints(base), rows});
    }
    const int gathered = b.Op("Gather", {flat, positions}, {{"axis", s.gather_axis < 0 ? int64_t{0} : s.gather_axis}});
    const int kept = b.Op("Reshape", {gathered, ints({-1, 0})});  // keeps [P, rows]
    picked = b.Op("Transpose", {kept}, {{"perm", std::vector<int64_t>{1, 0}}});
  } else {
    const int flat = s.form == Form::kFlatReshape ? b.Op("Reshape", {z, ints({-1, s.fields * s.fields})})
                                                  : b.Op("Flatten", {z}, {{"axis", int64_t{1}}});
    picked = b.Op("Gather", {flat, ints(list)}, {{"axis", s.gather_axis < 0 ? int64_t{1} : s.gather_axis}});
  }
  b.Output(dense >= 0 ? b.Op("Concat", {dense, picked}, {{"axis", int64_t{1}}}) : picked);
  return std::move(b.graph());
}

std::vector<Tensor> Inputs(const Spec& s, int64_t rows, std::mt19937_64& rng) {
  std::vector<Tensor> in{RandomF32({rows, s.fields, s.dim}, rng)};
  if (s.other_operand) in.push_back(RandomF32({rows, s.fields, s.dim}, rng));
  if (s.dense > 0) in.push_back(RandomF32({rows, s.dense}, rng));
  return in;
}

// `graph` fused at the probe's shapes; how many interactions fused.
int Fuse(Graph& graph, const Spec& s) {
  std::mt19937_64 rng(1);
  std::vector<TensorMeta> metas;
  for (const Tensor& t : Inputs(s, kProbeRows, rng)) metas.push_back({t.dtype(), t.shape(), nullptr});
  auto probe = Plan::Build(graph, metas);
  EXPECT_TRUE(probe.ok()) << probe.status().ToString();
  return probe.ok() ? FuseDotInteractions(graph, (*probe)->values()) : 0;
}

Spec RandomSpec(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Spec s;
  s.fields = pick(1, 30);
  s.dim = pick(1, 40);
  s.positions = static_cast<Positions>(pick(0, 2));
  if (s.fields == 1 && s.positions == Positions::kLower) s.positions = Positions::kUpperWithDiagonal;  // no pair below
  s.form = static_cast<Form>(pick(0, 2));
  s.dense = pick(0, 1) == 1 ? pick(1, 20) : 0;
  s.positions_computed = pick(0, 1) == 1;
  return s;
}

std::string Describe(const Spec& s) {
  return "fields " + std::to_string(s.fields) + " dim " + std::to_string(s.dim) + " positions " +
         std::to_string(static_cast<int>(s.positions)) + " form " + std::to_string(static_cast<int>(s.form)) +
         " dense " + std::to_string(s.dense) + " computed " + std::to_string(s.positions_computed);
}

TEST(DotInteractionFusion, RandomInteractionsScoreTheSameFusedOnTheCpu) {
  std::mt19937_64 rng(20261127);
  for (int trial = 0; trial < 60; ++trial) {
    const Spec s = RandomSpec(rng);
    std::mt19937_64 graph_rng(static_cast<uint64_t>(trial));
    Graph written = InteractionGraph(s, graph_rng);
    Graph fused = written;
    ASSERT_EQ(Fuse(fused, s), 1) << Describe(s);
    // The DotInteraction alone is left: the products, the gather, the reshapes, the shape
    // arithmetic and the Concat of the dense part are gone.
    ASSERT_EQ(fused.nodes.size(), 1u) << Describe(s);
    EXPECT_EQ(fused.nodes[0].op, "DotInteraction") << Describe(s);
    EXPECT_EQ(fused.nodes[0].HasInput(2), s.dense > 0) << Describe(s);
    for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{40}}) {
      testing::ExpectSameOutputs(fused, written, Inputs(s, rows, rng), 1e-5,
                                 Describe(s) + " rows " + std::to_string(rows));
    }
  }
}

TEST(DotInteractionFusion, RandomInteractionsScoreOnCudaAsOnTheCpu) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(91);
  for (int trial = 0; trial < 30; ++trial) {
    Spec s = RandomSpec(rng);
    if (trial == 0) {  // DLRM: 27 fields of 128, the strict lower triangle, its dense part
      s.fields = 27, s.dim = 128, s.positions = Positions::kLower, s.dense = 128;
    }
    if (trial == 1) s.fields = 60, s.dim = 1000;            // a row past shared memory: the global kernel
    if (trial == 2) s.fields = 8, s.dim = 32, s.dense = 0;  // fields a multiple of 4: no padding
    if (trial == 3) s.fields = 50, s.dim = 20;              // 91 tiles: more than a warp's lanes
    if (trial == 4) s.dim = 2;                              // fewer columns than warps splitting them
    std::mt19937_64 graph_rng(static_cast<uint64_t>(trial));
    Graph fused = InteractionGraph(s, graph_rng);
    ASSERT_EQ(Fuse(fused, s), 1) << Describe(s);
    // Rows around a block's four: one, four, five, many.
    for (int64_t rows : {int64_t{1}, int64_t{4}, int64_t{5}, int64_t{trial < 2 ? 300 : 1000}}) {
      testing::ExpectSameOutputs(fused, fused, Inputs(s, rows, rng), 1e-5,
                                 Describe(s) + " rows " + std::to_string(rows), *cuda);
    }
  }
}

TEST(DotInteractionFusion, WhatMustNotFuseDoesNot) {
  Spec other, products_out, flat_axis, indexed_axis, from_rows;
  other.other_operand = true;                                      // not a Gram matrix
  products_out.products_out = true;                                // an intermediate something else reads
  flat_axis.form = Form::kFlatReshape, flat_axis.gather_axis = 0;  // gathers rows, not products
  indexed_axis.gather_axis = 1;
  from_rows.positions_from_rows = true;
  for (const Spec& s : {other, products_out, flat_axis, indexed_axis, from_rows}) {
    std::mt19937_64 rng(5);
    Graph g = InteractionGraph(s, rng);
    const size_t nodes = g.nodes.size();
    EXPECT_EQ(Fuse(g, s), 0);
    EXPECT_EQ(g.nodes.size(), nodes);
  }
  // Positions that are a graph input, not a constant.
  GraphBuilder b;
  const int t = b.Input("t", DType::kF32, {-1, 3, 2});
  const int z = b.Op("MatMul", {t, b.Op("Transpose", {t}, {{"perm", std::vector<int64_t>{0, 2, 1}}})});
  const int flat = b.Op("Flatten", {z}, {{"axis", int64_t{1}}});
  b.Output(b.Op("Gather", {flat, b.Input("positions", DType::kI64, {2})}, {{"axis", int64_t{1}}}));
  Graph g = std::move(b.graph());
  auto probe = Plan::Build(g, {{DType::kF32, {kProbeRows, 3, 2}, nullptr}, {DType::kI64, {2}, nullptr}});
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  EXPECT_EQ(FuseDotInteractions(g, (*probe)->values()), 0);
}

// A pair naming a field past the features, or pairs that are not a constant, fail the plan.
TEST(DotInteractionFusion, BadPairsAreRefusedWhenPlanned) {
  for (int64_t field : {int64_t{3}, int64_t{-1}}) {
    GraphBuilder b;
    const int t = b.Input("t", DType::kF32, {-1, 3, 2});
    b.Output(b.Op("DotInteraction", {t, b.Const("pairs", MakeI64({2, 2}, {1, 0, 2, field}))}));
    auto plan = Plan::Build(b.graph(), {{DType::kF32, {4, 3, 2}, nullptr}});
    ASSERT_FALSE(plan.ok());
    EXPECT_NE(plan.status().message().find("names field"), std::string::npos) << plan.status().ToString();
  }
  GraphBuilder b;
  const int t = b.Input("t", DType::kF32, {-1, 3, 2});
  b.Output(b.Op("DotInteraction", {t, b.Input("pairs", DType::kI64, {2, 2})}));
  auto plan = Plan::Build(b.graph(), {{DType::kF32, {4, 3, 2}, nullptr}, {DType::kI64, {2, 2}, nullptr}});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("constant"), std::string::npos) << plan.status().ToString();
}

TEST(DotInteractionFusion, ZooDlrmFusesItsInteractionAndScoresAsPyTorch) {
  auto model = Model::Load(testing::SourcePath("models/zoo/dlrm"), -1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Graph& g = (*model)->graph();
  EXPECT_EQ((*model)->load_report().fused_dot_interactions, 1);
  EXPECT_EQ(CountOps(g, "DotInteraction"), 1);
  // The bottom MLP's output and the 26 bags in one concatenation, read by the interaction,
  // which writes the top MLP's input whole, the bottom's output in front: no product, transpose
  // or flattening is left (only the shape arithmetic of T's Reshape, which plans fold).
  EXPECT_EQ(CountOps(g, "ConcatEmbeddingBags"), 1);
  for (const char* op : {"MatMul", "Transpose", "Flatten"}) EXPECT_EQ(CountOps(g, op), 0) << op;
  for (const Node& n : g.nodes) {
    if (n.op != "DotInteraction") continue;
    EXPECT_TRUE(n.HasInput(2));
    int readers = 0;
    for (const Node& r : g.nodes) {
      if (r.Input(0) != n.outputs[0]) continue;
      EXPECT_EQ(r.op, "Gemm");
      ++readers;
    }
    EXPECT_EQ(readers, 1);
  }
  testing::ExpectZooScores(**model, "dlrm", 1e-5);
}

}  // namespace
}  // namespace rankd
