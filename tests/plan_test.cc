// The planner: memory reuse, aliases, plan-time folding; and ops whose ONNX conformance cases do
// not cover rankd's forms (FP32 Einsum, broadcast MatMul) against plain references.
#include "compile/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "compile/passes.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::GraphBuilder;
using testing::RunGraph;

Tensor Random(Shape shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  Tensor t = Tensor::Zeros(DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

TEST(Plan, ReusesWorkspaceAcrossAChain) {
  GraphBuilder b;
  int x = b.Input("x", DType::kF32, {-1});
  for (int i = 0; i < 10; ++i) x = b.Op(i % 2 ? "Relu" : "Neg", {x});
  b.Output(x);
  auto plan = Plan::Build(b.graph(), {{DType::kF32, {1024}, nullptr}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ((*plan)->steps().size(), 10u);
  // Ten 4 KiB intermediates, at most two alive at once.
  EXPECT_LE((*plan)->workspace_bytes(), 2 * 4096);
  Tensor in = Random({1024}, 1);
  auto out = RunGraph(b.graph(), {in});
  ASSERT_TRUE(out.ok());
  // Neg then Relu five times: relu(-relu(-...)) = 0 for every input after the second pair.
  for (int64_t i = 0; i < 1024; ++i) {
    float want = std::max(-in.data<float>()[i], 0.0f);
    for (int pair = 1; pair < 5; ++pair) want = std::max(-want, 0.0f);
    EXPECT_EQ((*out)[0].data<float>()[i], want);
  }
}

TEST(Plan, ReshapesAreAliasesAndShapeChainsFold) {
  // y = Reshape(x, Concat(Shape(x)[0], [-1])) : the target folds at plan time, the reshape is free.
  GraphBuilder b;
  int x = b.Input("x", DType::kF32, {-1, 3, 4});
  int shape = b.Op("Shape", {x});
  int zero = b.Const("zero", testing::MakeI64({1}, {0}));
  int batch = b.Op("Gather", {shape, zero});
  int rest = b.Const("rest", testing::MakeI64({1}, {-1}));
  int target = b.Op("Concat", {batch, rest}, {{"axis", int64_t{0}}});
  int y = b.Op("Reshape", {x, target});
  b.Output(b.Op("Relu", {y}));
  auto plan = Plan::Build(b.graph(), {{DType::kF32, {5, 3, 4}, nullptr}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ((*plan)->folded_nodes(), 3);   // Shape, Gather, Concat
  ASSERT_EQ((*plan)->steps().size(), 1u);  // only Relu runs
  EXPECT_EQ((*plan)->values()[static_cast<size_t>(y)].storage, PlanStorage::kAlias);
  auto out = RunGraph(b.graph(), {Random({5, 3, 4}, 2)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), Shape({5, 12}));
}

TEST(Plan, OpsThatMoveNoDataAreAliases) {
  // At [5, 1, 4]: a Cast to FLOAT, a Transpose moving the 1, an Expand and a Tile repeating
  // nothing and a Concat of one part leave x's elements in place; only the Relu runs.
  GraphBuilder b;
  int x = b.Input("x", DType::kF32, {-1, 1, 4});
  int cast = b.Op("Cast", {x}, {{"to", int64_t{1}}});
  int moved = b.Op("Transpose", {cast}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  int expanded = b.Op("Expand", {moved, b.Const("shape", testing::MakeI64({3}, {1, 1, 4}))});
  int tiled = b.Op("Tile", {expanded, b.Const("once", testing::MakeI64({3}, {1, 1, 1}))});
  int joined = b.Op("Concat", {tiled}, {{"axis", int64_t{1}}});
  b.Output(b.Op("Relu", {joined}));
  b.Output(cast);  // a graph output that is a graph input's buffer
  auto plan = Plan::Build(b.graph(), {{DType::kF32, {5, 1, 4}, nullptr}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ((*plan)->steps().size(), 1u);
  for (int v : {cast, moved, expanded, tiled, joined}) {
    EXPECT_EQ((*plan)->values()[static_cast<size_t>(v)].storage, PlanStorage::kAlias) << v;
  }
  Tensor in = Random({5, 1, 4}, 3);
  auto out = RunGraph(b.graph(), {in});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), Shape({1, 5, 4}));
  EXPECT_EQ((*out)[1].shape(), Shape({5, 1, 4}));
  for (int64_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ((*out)[0].data<float>()[i], std::max(in.data<float>()[i], 0.0f));
    EXPECT_EQ((*out)[1].data<float>()[i], in.data<float>()[i]);
  }
}

TEST(Plan, OpsThatMoveDataStillRun) {
  // The same ops where they do move data: each a step, with its own result.
  GraphBuilder b;
  int x = b.Input("x", DType::kF32, {-1, 1, 4});
  int cast = b.Op("Cast", {x}, {{"to", int64_t{7}}});  // INT64
  int moved = b.Op("Transpose", {x}, {{"perm", std::vector<int64_t>{2, 1, 0}}});
  int expanded = b.Op("Expand", {x, b.Const("shape", testing::MakeI64({3}, {1, 3, 4}))});
  int tiled = b.Op("Tile", {x, b.Const("twice", testing::MakeI64({3}, {2, 1, 1}))});
  int joined = b.Op("Concat", {x, x}, {{"axis", int64_t{1}}});
  for (int v : {cast, moved, expanded, tiled, joined}) b.Output(v);
  auto plan = Plan::Build(b.graph(), {{DType::kF32, {5, 1, 4}, nullptr}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ((*plan)->steps().size(), 5u);
  Tensor in = Random({5, 1, 4}, 4);
  for (int64_t i = 0; i < in.size(); ++i) in.data<float>()[i] *= 10;
  auto out = RunGraph(b.graph(), {in});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const float* x_data = in.data<float>();
  for (int64_t r = 0; r < 5; ++r) {
    for (int64_t c = 0; c < 4; ++c) {
      const float v = x_data[r * 4 + c];
      EXPECT_EQ((*out)[0].data<int64_t>()[r * 4 + c], static_cast<int64_t>(v));
      EXPECT_EQ((*out)[1].data<float>()[c * 5 + r], v);  // [4, 1, 5]
      for (int64_t k = 0; k < 3; ++k) EXPECT_EQ((*out)[2].data<float>()[(r * 3 + k) * 4 + c], v);
      EXPECT_EQ((*out)[3].data<float>()[r * 4 + c], v);
      EXPECT_EQ((*out)[3].data<float>()[(r + 5) * 4 + c], v);
      EXPECT_EQ((*out)[4].data<float>()[(r * 2 + 1) * 4 + c], v);
    }
  }
}

TEST(Plan, DataDependentShapesAreRefusedClearly) {
  GraphBuilder b;
  int x = b.Input("x", DType::kF32, {-1});
  int s = b.Input("s", DType::kI64, {1});
  b.Output(b.Op("Reshape", {x, s}));
  auto plan = Plan::Build(b.graph(), {{DType::kF32, {4}, nullptr}, {DType::kI64, {1}, nullptr}});
  EXPECT_EQ(plan.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(plan.status().message().find("depends on request data"), std::string::npos);
}

// Plain reference for two-operand einsum over explicit index loops.
Tensor ReferenceEinsum(const std::string& a_idx, const Tensor& a, const std::string& b_idx, const Tensor& b,
                       const std::string& out_idx) {
  std::map<char, int64_t> dims;
  for (size_t i = 0; i < a_idx.size(); ++i) dims[a_idx[i]] = a.dim(static_cast<int64_t>(i));
  for (size_t i = 0; i < b_idx.size(); ++i) dims[b_idx[i]] = b.dim(static_cast<int64_t>(i));
  Shape out_shape;
  for (char c : out_idx) out_shape.push_back(dims[c]);
  Tensor out = Tensor::Zeros(DType::kF32, out_shape);
  std::vector<char> letters;
  for (auto& [c, d] : dims) letters.push_back(c);
  std::map<char, int64_t> pos;
  for (char c : letters) pos[c] = 0;
  auto offset = [&](const std::string& idx, const Tensor& t) {
    int64_t off = 0;
    for (size_t i = 0; i < idx.size(); ++i) off = off * t.dim(static_cast<int64_t>(i)) + pos[idx[i]];
    return off;
  };
  while (true) {
    out.data<float>()[offset(out_idx, out)] += a.data<float>()[offset(a_idx, a)] * b.data<float>()[offset(b_idx, b)];
    size_t k = 0;
    for (; k < letters.size(); ++k) {
      if (++pos[letters[k]] < dims[letters[k]]) break;
      pos[letters[k]] = 0;
    }
    if (k == letters.size()) break;
  }
  return out;
}

TEST(Einsum, AttentionFormsMatchReference) {
  struct Case {
    std::string a, b, out;
    Shape sa, sb;
  };
  const Case cases[] = {
      {"bqd", "bkd", "bqk", {3, 5, 8}, {3, 7, 8}}, {"bhqk", "bhkd", "bhqd", {2, 4, 5, 6}, {2, 4, 6, 3}},
      {"bd", "bld", "bl", {4, 8}, {4, 9, 8}},      {"ij", "jk", "ki", {5, 6}, {6, 7}},
      {"bi", "bi", "b", {4, 5}, {4, 5}},
  };
  uint64_t seed = 10;
  for (const Case& c : cases) {
    GraphBuilder g;
    int a = g.Input("a", DType::kF32, c.sa);
    int b = g.Input("b", DType::kF32, c.sb);
    g.Output(g.Op("Einsum", {a, b}, {{"equation", c.a + "," + c.b + "->" + c.out}}));
    Tensor ta = Random(c.sa, seed++), tb = Random(c.sb, seed++);
    auto got = RunGraph(g.graph(), {ta, tb});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_LE(testing::RelativeError((*got)[0], ReferenceEinsum(c.a, ta, c.b, tb, c.out)), 1e-5) << c.a << "," << c.b;
  }
  GraphBuilder g;
  int a = g.Input("a", DType::kF32, {3, 4});
  g.Output(g.Op("Einsum", {a}, {{"equation", std::string("ij->ji")}}));
  Tensor ta = Random({3, 4}, 99);
  auto got = RunGraph(g.graph(), {ta});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].shape(), Shape({4, 3}));
  EXPECT_EQ((*got)[0].data<float>()[1 * 3 + 2], ta.data<float>()[2 * 4 + 1]);
}

TEST(MatMul, BroadcastBatchMatchesReference) {
  GraphBuilder g;
  int a = g.Input("a", DType::kF32, {2, 1, 3, 4});
  int b = g.Input("b", DType::kF32, {5, 4, 6});
  g.Output(g.Op("MatMul", {a, b}));
  Tensor ta = Random({2, 1, 3, 4}, 5), tb = Random({5, 4, 6}, 6);
  auto got = RunGraph(g.graph(), {ta, tb});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ((*got)[0].shape(), Shape({2, 5, 3, 6}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j)
      for (int m = 0; m < 3; ++m)
        for (int n = 0; n < 6; ++n) {
          float want = 0;
          for (int k = 0; k < 4; ++k)
            want += ta.data<float>()[(i * 3 + m) * 4 + k] * tb.data<float>()[(j * 4 + k) * 6 + n];
          EXPECT_NEAR((*got)[0].data<float>()[((i * 5 + j) * 3 + m) * 6 + n], want, 1e-5);
        }
}

}  // namespace
}  // namespace rankd

namespace rankd {
namespace {

Tensor RandomF32(Shape shape, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1, 1);
  Tensor t = Tensor::Zeros(DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

// Gemm -> Relu becomes one Gemm with the activation; the scores do not change. A Gemm whose
// product is also read elsewhere keeps its Relu.
TEST(GemmEpilogueFusion, FusesOnlyASoleReluReaderAndKeepsResults) {
  testing::GraphBuilder b;
  int x = b.Input("x", DType::kF32, {3, 4});
  int w = b.Const("w", testing::MakeF32({4, 2}, {1, -2, 3, -4, -5, 6, 7, -8}));
  int c = b.Const("c", testing::MakeF32({2}, {0.5f, -0.5f}));
  int fused = b.Op("Relu", {b.Op("Gemm", {x, w, c})});
  int shared = b.Op("Gemm", {x, w, c});
  b.Output(fused);
  b.Output(b.Op("Relu", {shared}));
  b.Output(shared);
  std::vector<Tensor> inputs{testing::MakeF32({3, 4}, {1, 2, 3, 4, -1, -2, -3, -4, 0.5f, -0.5f, 2, -2})};
  auto before = testing::RunGraph(b.graph(), inputs);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  Graph g = b.graph();
  EXPECT_EQ(FuseGemmEpilogues(g), 1);
  EXPECT_EQ(g.OpCounts()["Relu"], 1);
  auto after = testing::RunGraph(g, inputs);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  for (size_t i = 0; i < before->size(); ++i) EXPECT_EQ(testing::RelativeError((*after)[i], (*before)[i]), 0.0) << i;
  bool any_clamped = false;
  for (int64_t i = 0; i < (*after)[0].size(); ++i) any_clamped = any_clamped || (*before)[2].data<float>()[i] < 0;
  EXPECT_TRUE(any_clamped) << "the case must exercise the ReLU";
}

// A score's Gemm -> Sigmoid (one output column, as CTR models end) and a MatMul -> Add(bias) ->
// Sigmoid become one product each, with the same scores; a Sigmoid of a product read elsewhere,
// one after a Relu, and one of a batched MatMul of two activations (a two-tower score per
// candidate) stay.
TEST(GemmEpilogueFusion, SigmoidOfAProductIsItsEpilogue) {
  std::mt19937 rng(5);
  auto random = [&](Shape s) { return RandomF32(std::move(s), rng); };
  testing::GraphBuilder b;
  int x = b.Input("x", DType::kF32, {7, 6});
  b.Output(b.Op("Sigmoid", {b.Op("Gemm", {x, b.Const("w", random({1, 6})), b.Const("c", random({1}))},
                                 {{"transB", int64_t{1}}})}));
  b.Output(b.Op("Sigmoid",
                {b.Op("Add", {b.Op("MatMul", {x, b.Const("w2", random({6, 3}))}), b.Const("bias", random({3}))})}));
  int shared = b.Op("MatMul", {x, b.Const("w3", random({6, 2}))});
  b.Output(b.Op("Sigmoid", {shared}));
  b.Output(shared);
  b.Output(b.Op("Sigmoid", {b.Op("Relu", {b.Op("MatMul", {x, b.Const("w4", random({6, 2}))})})}));
  int users = b.Input("users", DType::kF32, {7, 1, 6});
  int items = b.Input("items", DType::kF32, {7, 6, 3});
  b.Output(b.Op("Sigmoid", {b.Op("MatMul", {users, items})}));  // batched: [7, 1, 3]
  std::vector<Tensor> inputs{random({7, 6}), random({7, 1, 6}), random({7, 6, 3})};
  auto before = RunGraph(b.graph(), inputs);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  Graph g = b.graph();
  EXPECT_EQ(FuseGemmEpilogues(g), 4);  // two Sigmoids, the MatMul's bias, the last MatMul's Relu
  EXPECT_EQ(testing::CountOps(g, "Sigmoid"), 3);
  int with_sigmoid = 0;
  for (const Node& n : g.nodes) with_sigmoid += n.GetString("activation", "") == "Sigmoid";
  EXPECT_EQ(with_sigmoid, 2);
  auto after = RunGraph(g, inputs);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ASSERT_EQ(after->size(), before->size());
  for (size_t i = 0; i < before->size(); ++i) {
    EXPECT_EQ((*after)[i].shape(), (*before)[i].shape()) << i;
    EXPECT_LE(testing::RelativeError((*after)[i], (*before)[i]), 1e-6) << "output " << i;
  }
}

// MatMul against a weight matrix, plus a bias row, then maybe a Relu: one MatMul with the bias as
// a third input and the activation, on A of rank 1 to 4 and biases [H], [1, H], [1, 1, H]; the
// scores do not change. A bias wider than the product, a non-constant bias, a batched weight and
// a product read twice are left alone.
TEST(GemmEpilogueFusion, MatMulTakesABiasRowAndARelu) {
  std::mt19937 rng(3);
  auto random = [&](Shape s) { return RandomF32(std::move(s), rng); };
  for (int64_t rank = 1; rank <= 4; ++rank) {
    for (Shape bias_shape : {Shape{3}, Shape{1, 3}, Shape{1, 1, 3}}) {
      for (bool relu : {false, true}) {
        Shape a_shape(static_cast<size_t>(rank), 2);
        a_shape.back() = 5;
        testing::GraphBuilder b;
        int a = b.Input("a", DType::kF32, a_shape);
        int bias = b.Const("bias", random(bias_shape));
        int product = b.Op("MatMul", {a, b.Const("w", random({5, 3}))});
        int sum = relu ? b.Op("Add", {bias, product}) : b.Op("Add", {product, bias});
        b.Output(relu ? b.Op("Relu", {sum}) : sum);
        b.Output(b.Op("MatMul", {a, b.Const("batched", random({2, 5, 3}))}));  // no epilogue: batched B
        std::vector<Tensor> inputs{random(a_shape)};
        auto before = testing::RunGraph(b.graph(), inputs);
        ASSERT_TRUE(before.ok()) << before.status().ToString();
        Graph g = b.graph();
        bool fits = static_cast<int64_t>(bias_shape.size()) <= rank;
        EXPECT_EQ(FuseGemmEpilogues(g), fits ? 1 + relu : 0) << rank << " " << ShapeToString(bias_shape);
        EXPECT_EQ(g.OpCounts()["Add"], fits ? 0 : 1);
        auto after = testing::RunGraph(g, inputs);
        ASSERT_TRUE(after.ok()) << after.status().ToString();
        for (size_t i = 0; i < before->size(); ++i) {
          EXPECT_EQ((*after)[i].shape(), (*before)[i].shape());
          EXPECT_LE(testing::RelativeError((*after)[i], (*before)[i]), 1e-6)
              << rank << " " << ShapeToString(bias_shape);
        }
      }
    }
  }
  testing::GraphBuilder b;
  int a = b.Input("a", DType::kF32, {4, 5});
  int product = b.Op("MatMul", {a, b.Const("w", random({5, 3}))});
  b.Output(b.Op("Add", {product, b.Op("Relu", {b.Const("bias", random({3}))})}));  // not a constant
  int c = b.Input("c", DType::kF32, {4, 3});
  b.Output(b.Op("Add", {b.Op("MatMul", {a, b.Const("w2", random({5, 3}))}), c}));  // not a constant row
  int shared = b.Op("MatMul", {a, b.Const("w3", random({5, 3}))});
  b.Output(b.Op("Add", {shared, b.Const("bias3", random({3}))}));
  b.Output(shared);  // read twice
  EXPECT_EQ(FuseGemmEpilogues(b.graph()), 0);
}

// A tanh-approximated Gelu of a product, once lowered, goes into the product's epilogue: Gemm ->
// Gelu and MatMul -> Add(bias) -> Gelu become one product each, within float rounding of the
// lowered ops (values around ±3, where the GELU bends). An erf Gelu, and a tanh Gelu of a product
// that is also read elsewhere, stay element-wise ops.
TEST(GemmEpilogueFusion, TanhGeluOfAProductIsItsEpilogue) {
  std::mt19937 rng(11);
  auto random = [&](Shape s) { return RandomF32(std::move(s), rng); };
  const std::map<std::string, AttributeValue> tanh{{"approximate", std::string("tanh")}};
  testing::GraphBuilder b;
  int x = b.Input("x", DType::kF32, {6, 5});
  int a = b.Input("a", DType::kF32, {2, 3, 5});
  int gemm = b.Op("Gemm", {x, b.Const("w", random({5, 4})), b.Const("c", random({4}))}, {{"alpha", 3.0f}});
  int sum = b.Op("Add", {b.Op("MatMul", {a, b.Const("w2", random({5, 3}))}), b.Const("bias", random({3}))});
  int erf_product = b.Op("MatMul", {x, b.Const("w3", random({5, 2}))});
  int shared = b.Op("MatMul", {x, b.Const("w4", random({5, 2}))});
  for (int v : {gemm, sum, erf_product, shared}) b.graph().values[static_cast<size_t>(v)].dtype = DType::kF32;
  b.Output(b.Op("Gelu", {gemm}, tanh));
  b.Output(b.Op("Gelu", {sum}, tanh));
  b.Output(b.Op("Gelu", {erf_product}));
  b.Output(b.Op("Gelu", {shared}, tanh));
  b.Output(shared);
  Graph lowered = b.graph();
  auto count = LowerGelus(lowered);
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  ASSERT_EQ(*count, 4);
  std::vector<Tensor> inputs{random({6, 5}), random({2, 3, 5})};
  auto before = RunGraph(lowered, inputs);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  Graph fused = lowered;
  EXPECT_EQ(FuseGemmEpilogues(fused), 3);  // the Gemm's Gelu, the MatMul's bias and its Gelu
  EXPECT_EQ(testing::CountOps(fused, "Tanh"), 1);
  EXPECT_EQ(testing::CountOps(fused, "Erf"), 1);
  int with_gelu = 0;
  for (const Node& n : fused.nodes) with_gelu += n.GetString("activation", "") == "GeluTanh";
  EXPECT_EQ(with_gelu, 2);
  auto after = RunGraph(fused, inputs);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ASSERT_EQ(after->size(), before->size());
  for (size_t i = 0; i < before->size(); ++i) {
    EXPECT_EQ((*after)[i].shape(), (*before)[i].shape()) << i;
    EXPECT_LE(testing::RelativeError((*after)[i], (*before)[i]), 1e-6) << "output " << i;
  }
}

// Add(Mul(a, b), c) becomes MulAdd(a, b, c) on FP32 values of any broadcast, the Mul on either
// side; a product read elsewhere and integer arithmetic are left alone.
TEST(MulAddFusion, FusesFp32ProductsReadOnceAndKeepsResults) {
  std::mt19937 rng(5);
  auto random = [&](Shape s) { return RandomF32(std::move(s), rng); };
  testing::GraphBuilder b;
  int x = b.Input("x", DType::kF32, {4, 6});
  int y = b.Input("y", DType::kF32, {4, 6});
  int ids = b.Input("ids", DType::kI64, {4, 6});
  int row = b.Const("row", random({6}));
  b.Output(b.Op("Add", {b.Op("Mul", {x, y}), x}));      // the DCN form
  b.Output(b.Op("Add", {row, b.Op("Mul", {row, y})}));  // product on the right, broadcasts
  int shared = b.Op("Mul", {x, row});
  b.Output(b.Op("Add", {shared, y}));
  b.Output(shared);                                       // read twice: kept
  b.Output(b.Op("Add", {b.Op("Mul", {ids, ids}), ids}));  // integers: kept
  Graph g = b.graph();
  std::vector<Tensor> inputs{random({4, 6}), random({4, 6}), testing::MakeI64({4, 6}, std::vector<int64_t>(24, 3))};
  std::vector<TensorMeta> metas;
  for (const Tensor& t : inputs) metas.push_back({t.dtype(), t.shape(), nullptr});
  auto probe = Plan::Build(g, metas);
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  EXPECT_EQ(FuseMulAdd(g, (*probe)->values()), 2);
  EXPECT_EQ(g.OpCounts()["MulAdd"], 2);
  auto before = testing::RunGraph(b.graph(), inputs);
  auto after = testing::RunGraph(g, inputs);
  ASSERT_TRUE(before.ok() && after.ok()) << after.status().ToString();
  for (size_t i = 0; i < before->size(); ++i) {
    EXPECT_EQ((*after)[i].shape(), (*before)[i].shape());
    EXPECT_LE(testing::RelativeError((*after)[i], (*before)[i]), 1e-6) << i;
  }
}

// A node with fewer inputs than its op takes is refused with a reason wherever its shapes would be
// inferred first: constant folding and the passes' plans run before Backend::CheckGraph (the
// model-loader fuzzer found a Gather of one input read past its inputs while folding).
TEST(Plan, TooFewInputsAreRefusedBeforeAnyShapeIsInferred) {
  std::mt19937 rng(9);
  GraphBuilder folded;
  folded.Output(folded.Op("Gather", {folded.Const("table", RandomF32({4, 3}, rng))}));
  auto fold = FoldConstants(folded.graph());
  ASSERT_FALSE(fold.ok());
  EXPECT_NE(fold.status().ToString().find("it takes 2 to 2"), std::string::npos) << fold.status().ToString();
  GraphBuilder planned;
  int x = planned.Input("x", DType::kF32, {4, 3});
  planned.Output(planned.Op("Gather", {x}));
  auto plan = Plan::Build(planned.graph(), {{DType::kF32, {4, 3}, nullptr}});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().ToString().find("it takes 2 to 2"), std::string::npos) << plan.status().ToString();
  GraphBuilder omitted;  // the required indices given as omitted (-1)
  omitted.Output(omitted.Op("Gather", {omitted.Input("y", DType::kF32, {4, 3}), -1}));
  auto missing = Plan::Build(omitted.graph(), {{DType::kF32, {4, 3}, nullptr}});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().ToString().find("required input 1 is missing"), std::string::npos)
      << missing.status().ToString();
}

}  // namespace
}  // namespace rankd
