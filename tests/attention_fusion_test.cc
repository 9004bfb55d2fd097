// DIN's attention unit fused into TargetAttention (FuseTargetAttention) and its kernels: random
// attention graphs (dims, widths, hidden layers, mask or none, the first layer's Adds in any order,
// hoisted or not) score the same fused as written on the CPU, and the CUDA kernels (fp32, and bf16
// on the tensor cores: a warp scoring one strip of positions or two, or the block's four warps
// theirs together on wgmma) as the CPU at lengths around their tile size; what must not fuse does
// not; a bad key row fails that run only; the zoo DIN fuses and scores as PyTorch.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <string>

#include "compile/passes.h"
#include "compile/plan.h"
#include "model/ops/target_attention.h"
#include "serving/model.h"
#include "test_util.h"

#if RANKD_HAVE_CUDA
#include "backend/cuda/settings.h"
#include "runtime/cuda_options.h"
#endif

namespace rankd {
namespace {

using testing::CountOps;
using testing::GraphBuilder;
using testing::MakeF32;
using testing::MakeI64;
using testing::RandomF32;
using testing::RunGraph;

constexpr int64_t kProbeRows = 7, kProbeLength = 3;

// Runs `check` with the bf16 kernel's warps scoring one strip of positions at a time, two, and
// the block's four together in wgmma's products (`--cuda attention_strips`), then puts the
// default back.
template <typename Check>
void WithEachStripCount(Check check) {
#if RANKD_HAVE_CUDA
  for (int strips : {1, 2, 4}) {
    cuda::SetAttentionStrips(strips);
    check(" strips " + std::to_string(strips));
  }
  cuda::SetAttentionStrips(CudaOptions{}.attention_strips);
#else
  check(std::string());
#endif
}

struct Spec {
  int64_t dim = 8, width = 12;
  std::vector<int64_t> hidden{6};  // widths of the ReLU layers after the first; a 1-wide layer ends
  bool mask = true, squeeze = true, hoisted = false, biases = true;
  int add_order = 0;       // which way the first layer's three terms are added
  bool swap = false;       // operand order of the Muls
  bool score_out = false;  // the score is also a graph output (must not fuse)
  const char* first_activation = "Relu";
};

// The attention unit as an export leaves it after the split, the epilogues and (hoisted) the
// gathers of user-side values with rankd.request_index. Inputs: keys [users or rows, L, dim],
// (hoisted) the request index [rows], query [rows, dim], (mask) mask [users or rows, L].
Graph AttentionGraph(const Spec& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  GraphBuilder b;
  auto weight = [&](int64_t in, int64_t out) {
    return b.Const("w", RandomF32({in, out}, rng, -1.5f / std::sqrt(float(in)), 1.5f / std::sqrt(float(in))));
  };
  auto axes = [&](int64_t a) { return b.Const("axes", MakeI64({1}, {a})); };
  int keys = b.Input("keys", DType::kF32, {-1, -1, s.dim});
  int index = s.hoisted ? b.Input("rankd.request_index", DType::kI64, {-1}) : -1;
  int query = b.Input("query", DType::kF32, {-1, s.dim});
  int mask = s.mask ? b.Input("mask", DType::kF32, {-1, -1}) : -1;
  auto per_candidate = [&](int v) { return s.hoisted ? b.Op("Gather", {v, index}, {{"axis", int64_t{0}}}) : v; };
  int kc = per_candidate(keys);
  int q3 = b.Op("Unsqueeze", {query, axes(1)});
  int key_term = per_candidate(b.Op("MatMul", {keys, weight(s.dim, s.width)}));
  std::vector<int> q_inputs{q3, weight(s.dim, s.width)};
  if (s.biases) q_inputs.push_back(b.Const("bq", RandomF32({s.width}, rng)));
  int query_term = b.Op("MatMul", q_inputs);
  int x = s.swap ? b.Op("Mul", {kc, q3}) : b.Op("Mul", {q3, kc});
  int cross_term = b.Op("MatMul", {x, weight(s.dim, s.width)});
  int sum = s.add_order == 0   ? b.Op("Add", {b.Op("Add", {key_term, cross_term}), query_term})
            : s.add_order == 1 ? b.Op("Add", {query_term, b.Op("Add", {cross_term, key_term})})
                               : b.Op("Add", {b.Op("Add", {cross_term, query_term}), key_term});
  int h = b.Op(s.first_activation, {sum});
  int64_t in = s.width;
  std::vector<int64_t> widths = s.hidden;
  widths.push_back(1);
  for (size_t i = 0; i < widths.size(); ++i) {
    std::vector<int> inputs{h, weight(in, widths[i])};
    if (s.biases) inputs.push_back(b.Const("b", RandomF32({widths[i]}, rng)));
    std::map<std::string, AttributeValue> attrs;
    if (i + 1 < widths.size()) attrs["activation"] = std::string("Relu");
    h = b.Op("MatMul", inputs, attrs);
    in = widths[i];
  }
  if (s.score_out) b.Output(h);
  int w = h;
  if (s.squeeze) {
    w = b.Op("Squeeze", {h, axes(2)});
    if (s.mask) w = s.swap ? b.Op("Mul", {per_candidate(mask), w}) : b.Op("Mul", {w, per_candidate(mask)});
    w = b.Op("Unsqueeze", {w, axes(-1)});
  }
  int pool = s.swap ? b.Op("Mul", {kc, w}) : b.Op("Mul", {w, kc});
  b.Output(b.Op("ReduceSum", {pool, axes(1)}, {{"keepdims", int64_t{0}}}));
  return std::move(b.graph());
}

std::vector<TensorMeta> Metas(const Spec& s, int64_t rows, int64_t users, int64_t length) {
  std::vector<TensorMeta> m{{DType::kF32, {s.hoisted ? users : rows, length, s.dim}, nullptr}};
  if (s.hoisted) m.push_back({DType::kI64, {rows}, nullptr});
  m.push_back({DType::kF32, {rows, s.dim}, nullptr});
  if (s.mask) m.push_back({DType::kF32, {s.hoisted ? users : rows, length}, nullptr});
  return m;
}

std::vector<Tensor> Inputs(const Spec& s, int64_t rows, int64_t users, int64_t length, std::mt19937_64& rng) {
  const int64_t u = s.hoisted ? users : rows;
  std::vector<Tensor> in{RandomF32({u, length, s.dim}, rng)};
  if (s.hoisted) {
    std::vector<int64_t> index(static_cast<size_t>(rows));
    for (int64_t& i : index) i = std::uniform_int_distribution<int64_t>(0, users - 1)(rng);
    in.push_back(MakeI64({rows}, index));
  }
  in.push_back(RandomF32({rows, s.dim}, rng));
  if (s.mask) {  // real lengths: ones then zeros, as DIN's cast of ids >= 0
    Tensor m = Tensor::Zeros(DType::kF32, {u, length});
    for (int64_t r = 0; r < u; ++r) {
      int64_t real = std::uniform_int_distribution<int64_t>(0, length)(rng);
      for (int64_t l = 0; l < length; ++l) m.data<float>()[r * length + l] = l < real ? 1.0f : 0.0f;
    }
    in.push_back(std::move(m));
  }
  return in;
}

// `graph` fused at the probe's shapes; how many units fused.
int Fuse(Graph& graph, const Spec& s) {
  auto probe = Plan::Build(graph, Metas(s, kProbeRows, kProbeRows, kProbeLength));
  EXPECT_TRUE(probe.ok()) << probe.status().ToString();
  return probe.ok() ? FuseTargetAttention(graph, (*probe)->values()) : 0;
}

Spec RandomSpec(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Spec s;
  s.dim = pick(2, 40);
  s.width = pick(1, 90);
  s.hidden.clear();
  for (int64_t i = pick(0, 3); i > 0; --i) s.hidden.push_back(pick(1, 70));
  s.squeeze = pick(0, 3) > 0;
  s.mask = s.squeeze && pick(0, 3) > 0;
  s.hoisted = pick(0, 1) == 1;
  s.biases = pick(0, 3) > 0;
  s.add_order = static_cast<int>(pick(0, 2));
  s.swap = pick(0, 1) == 1;
  return s;
}

std::string Describe(const Spec& s) {
  std::string h;
  for (int64_t w : s.hidden) h += std::to_string(w) + " ";
  return "dim " + std::to_string(s.dim) + " width " + std::to_string(s.width) + " hidden [" + h + "] mask " +
         std::to_string(s.mask) + " squeeze " + std::to_string(s.squeeze) + " hoisted " + std::to_string(s.hoisted) +
         " biases " + std::to_string(s.biases) + " adds " + std::to_string(s.add_order) + " swap " +
         std::to_string(s.swap);
}

TEST(AttentionFusion, RandomUnitsScoreTheSameFusedOnTheCpu) {
  std::mt19937_64 rng(20261123);
  for (int trial = 0; trial < 60; ++trial) {
    Spec s = RandomSpec(rng);
    Graph written = AttentionGraph(s, 1000 + static_cast<uint64_t>(trial));
    Graph fused = written;
    ASSERT_EQ(Fuse(fused, s), 1) << Describe(s);
    EXPECT_EQ(CountOps(fused, "TargetAttention"), 1) << Describe(s);
    // The query's Unsqueeze, the key and query projections and the fused node: no gather is left.
    EXPECT_EQ(fused.nodes.size(), 4u) << Describe(s);
    // Shapes other than the probe's: an empty sequence, one position, and a few chunks.
    for (int64_t length : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{70}}) {
      const int64_t rows = 1 + trial % 6, users = 1 + trial % 3;
      testing::ExpectSameOutputs(fused, written, Inputs(s, rows, users, length, rng), 1e-5,
                                 Describe(s) + " length " + std::to_string(length));
    }
  }
}

TEST(AttentionFusion, RandomUnitsScoreOnCudaAsOnTheCpu) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(77);
  for (int trial = 0; trial < 40; ++trial) {
    Spec s = RandomSpec(rng);
    if (trial == 0) s.dim = s.width = 128, s.hidden = {128, 128, 128};  // the widest the kernel takes
    // DIN's MLP (80, 40, 1), for which the bf16 kernel is built with fixed tile counts, at
    // embedding widths on and inside each of those builds.
    if (trial >= 1 && trial <= 5) {
      s.dim = std::array<int64_t, 5>{64, 50, 30, 128, 40}[trial - 1];
      s.width = trial == 2 ? 73 : 80;
      s.hidden = {trial == 3 ? 37 : 40};
    }
    Graph fused = AttentionGraph(s, 2000 + static_cast<uint64_t>(trial));
    ASSERT_EQ(Fuse(fused, s), 1) << Describe(s);
    // Around the kernel's tile of positions: one partial tile, exactly one, one and one more, several.
    for (int64_t length : {int64_t{0}, int64_t{1}, int64_t{63}, int64_t{64}, int64_t{65}, int64_t{300}}) {
      const int64_t rows = 1 + trial % 5, users = 1 + trial % 2;
      std::vector<Tensor> in = Inputs(s, rows, users, length, rng);
      // fp32 on the CUDA cores; bf16 on the tensor cores, its operands rounded to 8 bits of mantissa.
      testing::ExpectSameOutputs(fused, fused, in, 2e-5, Describe(s) + " length " + std::to_string(length) + " fp32",
                                 *cuda, Precision::kFp32);
      WithEachStripCount([&](const std::string& strips) {
        testing::ExpectSameOutputs(fused, fused, in, 3e-2,
                                   Describe(s) + " length " + std::to_string(length) + " bf16" + strips, *cuda,
                                   Precision::kBf16);
      });
    }
  }
}

// A block of the bf16 kernel takes up to 32 candidates of a tile, scored 8 at a time, and keeps a
// user's tile across those 8s: merged requests' candidates, in runs of one user (sorted) or
// mixed, against the CPU.
TEST(AttentionFusion, ManyCandidatesPerBlockScoreOnCudaAsOnTheCpu) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  Spec s;
  s.dim = 64, s.width = 80, s.hidden = {40}, s.hoisted = true;  // DIN's unit
  Graph fused = AttentionGraph(s, 31);
  ASSERT_EQ(Fuse(fused, s), 1);
  std::mt19937_64 rng(5);
  for (const bool sorted : {true, false}) {
    for (int64_t rows : {int64_t{1000}, int64_t{4000}}) {
      std::vector<Tensor> in = Inputs(s, rows, 5, 130, rng);
      if (sorted) std::sort(in[1].data<int64_t>(), in[1].data<int64_t>() + rows);
      WithEachStripCount([&](const std::string& strips) {
        testing::ExpectSameOutputs(fused, fused, in, 3e-2,
                                   "rows " + std::to_string(rows) + (sorted ? " sorted" : " mixed") + strips, *cuda,
                                   Precision::kBf16);
      });
    }
  }
}

TEST(AttentionFusion, WhatMustNotFuseDoesNot) {
  Spec score_out;
  score_out.score_out = true;  // an intermediate something else reads
  Spec sigmoid;
  sigmoid.first_activation = "Sigmoid";
  Spec too_wide;
  too_wide.width = target_attention::kMaxWidth + 1;
  Spec too_deep;
  too_deep.hidden = std::vector<int64_t>(static_cast<size_t>(target_attention::kMaxLayers), 4);
  for (const Spec& s : {score_out, sigmoid, too_wide, too_deep}) {
    Graph g = AttentionGraph(s, 5);
    size_t nodes = g.nodes.size();
    EXPECT_EQ(Fuse(g, s), 0) << Describe(s);
    EXPECT_EQ(g.nodes.size(), nodes);
  }
  Spec deepest;  // kMaxLayers (weight, bias) pairs in all
  deepest.hidden = std::vector<int64_t>(static_cast<size_t>(target_attention::kMaxLayers - 1), 4);
  Graph g = AttentionGraph(deepest, 5);
  EXPECT_EQ(Fuse(g, deepest), 1);
}

// A key row outside the users fails that run (CPU and CUDA), and the next good run is right.
TEST(AttentionFusion, BadKeyRowFailsThatRunOnly) {
  Spec s;
  s.hoisted = true;
  Graph fused = AttentionGraph(s, 9);
  ASSERT_EQ(Fuse(fused, s), 1);
  std::mt19937_64 rng(3);
  std::vector<Tensor> good = Inputs(s, 3, 2, 70, rng);
  std::vector<const Backend*> backends{&CpuBackend()};
  if (const Backend* cuda = testing::CudaOrNull()) backends.push_back(cuda);
  auto want = RunGraph(fused, good);
  ASSERT_TRUE(want.ok());
  for (const Backend* backend : backends) {
    for (int64_t row : {int64_t{2}, int64_t{-1}}) {
      std::vector<Tensor> bad = good;
      bad[1] = MakeI64({3}, {0, row, 1});
      auto failed = RunGraph(fused, bad, {}, *backend);
      ASSERT_FALSE(failed.ok()) << backend->name() << " row " << row;
      EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument) << failed.status().ToString();
    }
    auto again = RunGraph(fused, good, {}, *backend);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    testing::ExpectOutputsNear(*again, *want, 2e-5, backend->name());
  }
  if (const Backend* cuda = testing::CudaOrNull()) {  // the tensor-core kernel too
    std::vector<Tensor> bad = good;
    bad[1] = MakeI64({3}, {0, 5, 1});
    auto failed = RunGraph(fused, bad, {}, *cuda, Precision::kBf16);
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument) << failed.status().ToString();
  }
}

TEST(AttentionFusion, ZooDinFusesItsAttentionUnitAndScoresAsPyTorch) {
  for (int hoisting : {1, 0}) {
    ModelOptions options;
    options.user_hoisting = hoisting;
    auto model = Model::Load(testing::SourcePath("models/zoo/din"), -1, options);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    EXPECT_EQ((*model)->load_report().fused_attention, 1);
    EXPECT_EQ(CountOps((*model)->graph(), "TargetAttention"), 1);
    EXPECT_EQ(CountOps((*model)->graph(), "ReduceSum"), 0);
    if (hoisting) {  // only the profile's bags are still gathered; the keys, their projection and the mask are read per
                     // user
      EXPECT_EQ((*model)->load_report().hoisting_gathers, std::vector<std::string>{"/Concat_3.user_part0"});
    }
    testing::ExpectZooScores(**model, "din", 1e-5);
  }
  ModelOptions unfused;
  unfused.fusion = false;
  auto model = Model::Load(testing::SourcePath("models/zoo/din"), -1, unfused);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(CountOps((*model)->graph(), "TargetAttention"), 0);
}

}  // namespace
}  // namespace rankd
