// Softmax attention fused into SoftmaxAttention (FuseSoftmaxAttention) and its kernels: random
// attention graphs of the three forms (several heads, one head, pooling one query column), with
// or without a mask (either way round, through a Cast or not), scaled by a Div, a Mul or not,
// hoisted or not, score the same fused as written on the CPU, and on CUDA as on the CPU at lengths
// around a warp; what must not fuse does not; a bad key row fails that run only; the zoo BST fuses
// its three attentions and scores as PyTorch.
#include <gtest/gtest.h>

#include <cmath>
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
using testing::RunGraph;

constexpr int64_t kProbeRows = 7, kProbeLength = 3, kProbePositions = 2;

enum class Form { kHeads, kOneHead, kPooling };

struct Spec {
  Form form = Form::kHeads;
  int64_t heads = 2, dim = 4, value_dim = 3, positions = 2;
  int mask = 1;      // 0: none, 1: Where(mask, fill, s), 2: Where(keep, s, fill)
  bool cast = true;  // the mask through a Cast to BOOL
  int scale = 1;     // 0: none, 1: Div, 2: Mul
  bool hoisted = false;
  bool shared_kv = false;  // pooling: the values are the keys (BST)
  bool score_out = false;  // the scores are also a graph output (must not fuse)
  int64_t softmax_axis = -1;
};

int64_t QueryWidth(const Spec& s) { return s.heads * s.dim; }
int64_t ValueWidth(const Spec& s) { return s.shared_kv ? QueryWidth(s) : s.heads * s.value_dim; }

// Inputs: query, keys, values (unless shared), mask (BOOL, true = drop for mask 1, keep for 2),
// the request index (hoisted). Keys, values and mask are per user when hoisted.
Graph AttentionGraph(const Spec& s) {
  GraphBuilder b;
  auto ints = [&](std::vector<int64_t> v) { return b.Const("c", MakeI64({static_cast<int64_t>(v.size())}, v)); };
  const Shape query_shape = s.form == Form::kPooling ? Shape{-1, QueryWidth(s)} : Shape{-1, -1, QueryWidth(s)};
  int query = b.Input("query", DType::kF32, query_shape);
  int keys = b.Input("keys", DType::kF32, {-1, -1, QueryWidth(s)});
  int values = s.shared_kv ? keys : b.Input("values", DType::kF32, {-1, -1, ValueWidth(s)});
  int mask = s.mask ? b.Input("mask", DType::kBool, {-1, -1}) : -1;
  int index = s.hoisted ? b.Input("rankd.request_index", DType::kI64, {-1}) : -1;
  auto per_row = [&](int v) { return s.hoisted ? b.Op("Gather", {v, index}, {{"axis", int64_t{0}}}) : v; };
  keys = per_row(keys);
  values = s.shared_kv ? keys : per_row(values);
  if (mask >= 0) mask = per_row(mask);

  int scores = -1;
  if (s.form == Form::kHeads) {
    auto heads = [&](int x, int64_t d, std::vector<int64_t> perm) {
      return b.Op("Transpose", {b.Op("Reshape", {x, ints({0, 0, s.heads, d})})}, {{"perm", perm}});
    };
    scores = b.Op("MatMul", {heads(query, s.dim, {0, 2, 1, 3}), heads(keys, s.dim, {0, 2, 3, 1})});
    values = heads(values, s.value_dim, {0, 2, 1, 3});
    if (mask >= 0) mask = b.Op("Unsqueeze", {mask, ints({1, 2})});
  } else if (s.form == Form::kOneHead) {
    scores = b.Op("MatMul", {query, b.Op("Transpose", {keys}, {{"perm", std::vector<int64_t>{0, 2, 1}}})});
    if (mask >= 0) mask = b.Op("Unsqueeze", {mask, ints({1})});
  } else {
    scores = b.Op("Squeeze", {b.Op("MatMul", {keys, b.Op("Unsqueeze", {query, ints({2})})}), ints({2})});
  }
  if (s.score_out) b.Output(scores);
  const float c = 1.0f / std::sqrt(static_cast<float>(s.dim));
  if (s.scale == 1) scores = b.Op("Div", {scores, b.Const("c", testing::MakeF32({}, {1.0f / c}))});
  if (s.scale == 2) scores = b.Op("Mul", {b.Const("c", testing::MakeF32({}, {c})), scores});
  if (mask >= 0) {
    if (s.cast) mask = b.Op("Cast", {mask}, {{"to", int64_t{9}}});
    int fill = b.Const("fill", testing::MakeF32({}, {-1e9f}));
    scores = s.mask == 1 ? b.Op("Where", {mask, fill, scores}) : b.Op("Where", {mask, scores, fill});
  }
  int probs = b.Op("Softmax", {scores}, {{"axis", s.softmax_axis}});
  if (s.form == Form::kHeads) {
    int out = b.Op("MatMul", {probs, values});
    out = b.Op("Transpose", {out}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    b.Output(b.Op("Reshape", {out, ints({0, 0, ValueWidth(s)})}));
  } else if (s.form == Form::kOneHead) {
    b.Output(b.Op("MatMul", {probs, values}));
  } else {
    int weighted = b.Op("Mul", {b.Op("Unsqueeze", {probs, ints({2})}), values});
    b.Output(b.Op("ReduceSum", {weighted, ints({1})}, {{"keepdims", int64_t{0}}}));
  }
  return std::move(b.graph());
}

std::vector<Tensor> Inputs(const Spec& s, int64_t rows, int64_t users, int64_t length, std::mt19937_64& rng) {
  const int64_t u = s.hoisted ? users : rows;
  std::vector<Tensor> in;
  in.push_back(s.form == Form::kPooling ? RandomF32({rows, QueryWidth(s)}, rng, -2, 2)
                                        : RandomF32({rows, s.positions, QueryWidth(s)}, rng, -2, 2));
  in.push_back(RandomF32({u, length, QueryWidth(s)}, rng, -2, 2));
  if (!s.shared_kv) in.push_back(RandomF32({u, length, ValueWidth(s)}, rng));
  if (s.mask) {  // real lengths, 0 among them: the positions past each are dropped
    Tensor m = Tensor::Zeros(DType::kBool, {u, length});
    for (int64_t r = 0; r < u; ++r) {
      const int64_t real = std::uniform_int_distribution<int64_t>(0, length)(rng);
      for (int64_t l = 0; l < length; ++l) m.data<uint8_t>()[r * length + l] = (l >= real) == (s.mask == 1);
    }
    in.push_back(std::move(m));
  }
  if (s.hoisted) {
    std::vector<int64_t> index(static_cast<size_t>(rows));
    for (int64_t& i : index) i = std::uniform_int_distribution<int64_t>(0, users - 1)(rng);
    in.push_back(MakeI64({rows}, index));
  }
  return in;
}

// `graph` fused at the probe's shapes; how many attentions fused.
int Fuse(Graph& graph, const Spec& s) {
  std::mt19937_64 rng(1);
  std::vector<TensorMeta> metas;
  for (const Tensor& t : Inputs(s, kProbeRows, kProbeRows, kProbeLength, rng))
    metas.push_back({t.dtype(), t.shape(), nullptr});
  if (s.form != Form::kPooling) metas[0].shape[1] = kProbePositions;
  auto probe = Plan::Build(graph, metas);
  EXPECT_TRUE(probe.ok()) << probe.status().ToString();
  return probe.ok() ? FuseSoftmaxAttention(graph, (*probe)->values()) : 0;
}

Spec RandomSpec(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Spec s;
  s.form = static_cast<Form>(pick(0, 2));
  s.heads = s.form == Form::kHeads ? pick(1, 4) : 1;
  s.dim = pick(1, 24);
  s.value_dim = pick(1, 80);
  s.positions = pick(1, 5);
  s.mask = static_cast<int>(pick(0, 2));
  s.cast = pick(0, 1) == 1;
  s.scale = static_cast<int>(pick(0, 2));
  s.hoisted = pick(0, 1) == 1;
  s.shared_kv = s.form == Form::kPooling && pick(0, 1) == 1;
  s.softmax_axis = pick(0, 1) == 1 ? -1 : (s.form == Form::kHeads ? 3 : s.form == Form::kOneHead ? 2 : 1);
  return s;
}

std::string Describe(const Spec& s) {
  return "form " + std::to_string(static_cast<int>(s.form)) + " heads " + std::to_string(s.heads) + " dim " +
         std::to_string(s.dim) + " value_dim " + std::to_string(s.value_dim) + " positions " +
         std::to_string(s.positions) + " mask " + std::to_string(s.mask) + " cast " + std::to_string(s.cast) +
         " scale " + std::to_string(s.scale) + " hoisted " + std::to_string(s.hoisted) + " shared " +
         std::to_string(s.shared_kv);
}

TEST(SoftmaxAttentionFusion, RandomAttentionsScoreTheSameFusedOnTheCpu) {
  std::mt19937_64 rng(20261123);
  for (int trial = 0; trial < 60; ++trial) {
    Spec s = RandomSpec(rng);
    Graph written = AttentionGraph(s);
    Graph fused = written;
    ASSERT_EQ(Fuse(fused, s), 1) << Describe(s);
    EXPECT_EQ(CountOps(fused, "SoftmaxAttention"), 1) << Describe(s);
    // Only the fused node is left, and the mask's Cast when it was not absorbed (a written Cast
    // of a BOOL is).
    EXPECT_EQ(fused.nodes.size(), 1u) << Describe(s);
    // Shapes other than the probe's: an empty sequence, one position, a few, many.
    for (int64_t length : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{40}}) {
      const int64_t rows = 1 + trial % 6, users = 1 + trial % 3;
      testing::ExpectSameOutputs(fused, written, Inputs(s, rows, users, length, rng), 1e-5,
                                 Describe(s) + " length " + std::to_string(length));
    }
  }
}

TEST(SoftmaxAttentionFusion, RandomAttentionsScoreOnCudaAsOnTheCpu) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(78);
  for (int trial = 0; trial < 40; ++trial) {
    Spec s = RandomSpec(rng);
    if (trial == 0)
      s.form = Form::kHeads, s.heads = 4, s.dim = 16, s.value_dim = 16, s.positions = 50;  // BST's encoder
    if (trial == 1)
      s.form = Form::kPooling, s.heads = 1, s.dim = 64, s.shared_kv = true, s.hoisted = true;  // and its pooling
    if (trial <= 1) s.softmax_axis = -1;
    if (trial == 2) s.value_dim = 200;  // more value columns than one round of the kernel
    Graph fused = AttentionGraph(s);
    ASSERT_EQ(Fuse(fused, s), 1) << Describe(s);
    // Around a warp of positions: one, a warp less one, a warp, one more, many.
    for (int64_t length : {int64_t{0}, int64_t{1}, int64_t{31}, int64_t{32}, int64_t{33}, int64_t{300}}) {
      const int64_t rows = 1 + trial % 5, users = 1 + trial % 2;
      testing::ExpectSameOutputs(fused, fused, Inputs(s, rows, users, length, rng), 2e-5,
                                 Describe(s) + " length " + std::to_string(length), *cuda);
    }
  }
}

TEST(SoftmaxAttentionFusion, WhatMustNotFuseDoesNot) {
  Spec score_out;
  score_out.score_out = true;  // an intermediate something else reads
  Spec wrong_axis;
  wrong_axis.form = Form::kOneHead, wrong_axis.heads = 1, wrong_axis.softmax_axis = 1;  // over the queries
  for (const Spec& s : {score_out, wrong_axis}) {
    Graph g = AttentionGraph(s);
    const size_t nodes = g.nodes.size();
    EXPECT_EQ(Fuse(g, s), 0) << Describe(s);
    EXPECT_EQ(g.nodes.size(), nodes);
  }
}

// A key row outside the users fails that run (CPU and CUDA), and the next good run is right.
TEST(SoftmaxAttentionFusion, BadKeyRowFailsThatRunOnly) {
  Spec s;
  s.form = Form::kPooling, s.heads = 1, s.hoisted = true;
  Graph fused = AttentionGraph(s);
  ASSERT_EQ(Fuse(fused, s), 1);
  std::mt19937_64 rng(3);
  std::vector<Tensor> good = Inputs(s, 3, 2, 40, rng);
  std::vector<const Backend*> backends{&CpuBackend()};
  if (const Backend* cuda = testing::CudaOrNull()) backends.push_back(cuda);
  auto want = RunGraph(fused, good);
  ASSERT_TRUE(want.ok());
  for (const Backend* backend : backends) {
    for (int64_t row : {int64_t{2}, int64_t{-1}}) {
      std::vector<Tensor> bad = good;
      bad.back() = MakeI64({3}, {0, row, 1});
      auto failed = RunGraph(fused, bad, {}, *backend);
      ASSERT_FALSE(failed.ok()) << backend->name() << " row " << row;
      EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument) << failed.status().ToString();
    }
    auto again = RunGraph(fused, good, {}, *backend);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    testing::ExpectOutputsNear(*again, *want, 2e-5, backend->name());
  }
}

TEST(SoftmaxAttentionFusion, ZooBstFusesItsAttentionsAndScoresAsPyTorch) {
  for (const char* name : {"bst", "bst_opset13"}) {
    for (int hoisting : {1, 0}) {
      ModelOptions options;
      options.user_hoisting = hoisting;
      auto model = Model::Load(testing::SourcePath(std::string("models/zoo/") + name), -1, options);
      ASSERT_TRUE(model.ok()) << model.status().ToString();
      // Two encoder layers' self-attention and the candidate's pooling over the sequence.
      EXPECT_EQ((*model)->load_report().fused_softmax_attention, 3) << name;
      EXPECT_EQ(CountOps((*model)->graph(), "Softmax"), 0) << name;
      EXPECT_EQ(CountOps((*model)->graph(), "Transpose"), 0) << name;
      if (hoisting) {  // the encoded sequence and its mask are read per user, not gathered
        EXPECT_EQ((*model)->load_report().hoisting_gathers, std::vector<std::string>{"/Concat.user_part2"}) << name;
      }
      testing::ExpectZooScores(**model, name, 1e-5);
    }
  }
  ModelOptions unfused;
  unfused.fusion = false;
  auto model = Model::Load(testing::SourcePath("models/zoo/bst"), -1, unfused);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(CountOps((*model)->graph(), "SoftmaxAttention"), 0);
  EXPECT_EQ(CountOps((*model)->graph(), "Softmax"), 3);
}

}  // namespace
}  // namespace rankd
