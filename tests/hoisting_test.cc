// User-side hoisting: the pass on random and hand-built graphs (hoisted scores equal the graph as
// written, with user rows repeated), and on the zoo's W2 (din) and W3 (bst) models.
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <random>

#include "batching/batch_merge.h"
#include "compile/passes.h"
#include "compile/plan.h"
#include "rankd/request.h"
#include "serving/model.h"
#include "serving/shape_buckets.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::GraphBuilder;
using testing::MakeF32;
using testing::MakeI64;
using testing::RunGraph;

constexpr int64_t kWidth = 4;

Tensor RandomRows(int64_t rows, int64_t width, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> d(-1, 1);
  Tensor t = Tensor::Zeros(DType::kF32, {rows, width});
  for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

Tensor GatherRows(const Tensor& t, const std::vector<int64_t>& index) {
  Shape s = t.shape();
  s[0] = static_cast<int64_t>(index.size());
  Tensor out = Tensor::Zeros(t.dtype(), s);
  size_t row = t.bytes() / static_cast<size_t>(t.dim(0));
  for (size_t i = 0; i < index.size(); ++i) {
    std::memcpy(static_cast<uint8_t*>(out.raw()) + i * row, static_cast<const uint8_t*>(t.raw()) + index[i] * row, row);
  }
  return out;
}

// Hoists `graph` (its first `user_inputs` inputs are user rows, the rest candidate rows, all
// [rows, kWidth] FP32), then scores 3 users' rows once against the graph as written with each
// user's row repeated to its candidates. Returns the report.
HoistReport ExpectHoistedScoresTheSame(const Graph& graph, size_t user_inputs, uint64_t seed) {
  std::vector<TensorMeta> metas(graph.inputs.size(), TensorMeta{DType::kF32, {7, kWidth}, nullptr});
  auto plan = Plan::Build(graph, metas);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (!plan.ok()) return {};
  std::vector<int> user_rows(graph.inputs.begin(), graph.inputs.begin() + static_cast<long>(user_inputs));
  Graph hoisted = graph;
  HoistReport report = HoistUserSide(hoisted, user_rows, {}, (*plan)->values(), 7);

  std::mt19937_64 rng(seed);
  const std::vector<int64_t> index = {0, 0, 1, 1, 1, 2, 2};  // 3 users, 7 candidates
  std::vector<Tensor> written, per_user;
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    if (i < user_inputs) {
      Tensor users = RandomRows(3, kWidth, rng);
      per_user.push_back(users);
      written.push_back(GatherRows(users, index));
    } else {
      Tensor candidates = RandomRows(static_cast<int64_t>(index.size()), kWidth, rng);
      per_user.push_back(candidates);
      written.push_back(candidates);
    }
  }
  auto want = RunGraph(graph, written);
  EXPECT_TRUE(want.ok()) << want.status().ToString();
  if (!report.hoisted) {
    EXPECT_EQ(hoisted.nodes.size(), graph.nodes.size()) << "a graph left alone keeps its nodes";
    return report;
  }
  per_user.push_back(MakeI64({static_cast<int64_t>(index.size())}, index));
  auto got = RunGraph(hoisted, per_user);
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  if (!want.ok() || !got.ok()) return report;
  EXPECT_EQ(got->size(), want->size());
  for (size_t o = 0; o < want->size() && o < got->size(); ++o) {
    EXPECT_EQ((*got)[o].shape(), (*want)[o].shape()) << "seed " << seed;
    EXPECT_LE(testing::RelativeError((*got)[o], (*want)[o]), 1e-5) << "seed " << seed;
  }
  return report;
}

// A random graph over two user and two candidate inputs [rows, 4]: element-wise ops, products
// with weights, reductions, concats, shape arithmetic, and ops that mix rows (softmax and sums
// over the batch axis, transposes) that must never run once per user.
Graph RandomGraph(uint64_t seed) {
  std::mt19937_64 rng(seed);
  GraphBuilder b;
  std::vector<int> pool;
  for (const char* name : {"u0", "u1", "c0", "c1"}) pool.push_back(b.Input(name, DType::kF32, {-1, kWidth}));
  auto pick = [&] { return pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)]; };
  std::vector<float> w(kWidth * kWidth), w2(2 * kWidth * kWidth), bias(kWidth);
  std::uniform_real_distribution<float> d(-0.5f, 0.5f);
  for (float& x : w) x = d(rng);
  for (float& x : w2) x = d(rng);
  for (float& x : bias) x = d(rng);
  int weight = b.Const("w", MakeF32({kWidth, kWidth}, w));
  int weight2 = b.Const("w2", MakeF32({2 * kWidth, kWidth}, w2));
  int row = b.Const("bias", MakeF32({kWidth}, bias));
  int row2d = b.Const("bias2d", MakeF32({1, kWidth}, bias));
  int axes1 = b.Const("axes1", MakeI64({1}, {1}));
  int axes0 = b.Const("axes0", MakeI64({1}, {0}));
  int zero = b.Const("zero", MakeI64({1}, {0}));
  int split = b.Const("split", MakeI64({2}, {2, 2}));
  int flat = b.Const("flat", MakeI64({2}, {0, -1}));
  int any_rows = b.Const("any_rows", MakeI64({2}, {-1, kWidth}));
  for (int step = 0; step < 14; ++step) {
    int x = pick(), y = pick(), out = -1;
    switch (std::uniform_int_distribution<int>(0, 13)(rng)) {
      case 0:
        out = b.Op("Add", {x, y});
        break;
      case 1:
        out = b.Op("Mul", {x, b.Op("Sigmoid", {y})});
        break;
      case 2:
        out = b.Op("Relu", {b.Op("Add", {b.Op("MatMul", {x, weight}), row})});
        break;
      case 3:
        out = b.Op("Gemm", {x, weight, row2d});
        break;
      case 4:
        out = b.Op("Sub", {x, b.Op("ReduceSum", {x, axes1}, {{"keepdims", int64_t{1}}})});
        break;
      case 5:
        out = b.Op("MatMul", {b.Op("Concat", {x, y}, {{"axis", int64_t{1}}}), weight2});
        break;
      case 6:
        out = b.Op("Softmax", {x}, {{"axis", int64_t{1}}});
        break;
      case 7:
        out = b.Op("Softmax", {x}, {{"axis", int64_t{0}}});
        break;  // mixes rows
      case 8:
        out = b.Op("Add", {x, b.Op("ReduceSum", {y, axes0}, {{"keepdims", int64_t{1}}})});
        break;   // mixes rows
      case 9: {  // reshape through [B, 2, 2] with the batch size read from the shape, and back
        int batch = b.Op("Gather", {b.Op("Shape", {x}), zero});
        int target = b.Op("Concat", {batch, split}, {{"axis", int64_t{0}}});
        out = b.Op("Reshape", {b.Op("Reshape", {x, target}), flat});
        break;
      }
      case 10:
        out = b.Op("Transpose", {b.Op("Relu", {b.Op("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 0}}})})},
                   {{"perm", std::vector<int64_t>{1, 0}}});
        break;
      case 11:
        out = b.Op("Expand", {row2d, b.Op("Shape", {x})});
        break;  // rows from x's shape
      case 12:
        out = b.Op("Reshape", {b.Op("Mul", {x, y}), any_rows});
        break;
      default:
        out = b.Op("MatMul", {b.Op("Tanh", {x}), weight});
        break;
    }
    pool.push_back(out);
  }
  // Two outputs from the last values, so user-only values may be outputs too.
  b.Output(b.Op("Add", {pool[pool.size() - 1], pool[pool.size() - 2]}));
  b.Output(pool[pool.size() - 3]);
  return std::move(b.graph());
}

TEST(UserHoisting, RandomGraphsScoreTheSameHoisted) {
  int hoisted = 0, kept = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    Graph graph = RandomGraph(seed);
    RemoveDeadNodes(graph);
    HoistReport r = ExpectHoistedScoresTheSame(graph, 2, seed);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "first failing seed " << seed;
      return;
    }
    (r.hoisted ? hoisted : kept) += 1;
  }
  // Both outcomes occur, so both paths were exercised.
  EXPECT_GT(hoisted, 50);
  EXPECT_GT(kept, 5);
}

TEST(UserHoisting, RowMixingUserOpRunsPerCandidate) {
  // user -> MatMul (once per user) -> Softmax over the batch (per candidate) -> + candidate
  GraphBuilder b;
  int u = b.Input("u", DType::kF32, {-1, kWidth});
  int c = b.Input("c", DType::kF32, {-1, kWidth});
  int w = b.Const("w", MakeF32({kWidth, kWidth}, std::vector<float>(kWidth * kWidth, 0.25f)));
  int mixed = b.Op("Softmax", {b.Op("MatMul", {u, w})}, {{"axis", int64_t{0}}});
  b.Output(b.Op("Add", {mixed, c}));
  HoistReport r = ExpectHoistedScoresTheSame(b.graph(), 1, 7);
  EXPECT_TRUE(r.hoisted);
  EXPECT_EQ(r.user_compute_nodes, 1);  // the MatMul
  EXPECT_EQ(r.gathered.size(), 1u);    // its result, before the softmax
}

TEST(UserHoisting, UserShapeReadByACandidateOpIsRecomputedPerCandidate) {
  // Expand(candidate value, Shape(user value)): DIN's query.expand_as(keys).
  GraphBuilder b;
  int u = b.Input("u", DType::kF32, {-1, kWidth});
  int c = b.Input("c", DType::kF32, {-1, kWidth});
  int keys = b.Op("Relu", {b.Op("Add", {u, u})});
  int query = b.Op("ReduceSum", {c, b.Const("axes", MakeI64({1}, {1}))}, {{"keepdims", int64_t{1}}});  // [B, 1]
  int expanded = b.Op("Expand", {query, b.Op("Shape", {keys})});
  b.Output(b.Op("Mul", {expanded, keys}));
  HoistReport r = ExpectHoistedScoresTheSame(b.graph(), 1, 11);
  EXPECT_TRUE(r.hoisted);
}

TEST(UserHoisting, RunsOfUserInputsToACandidateConcatAreGatheredOnce) {
  // Concat(u·w, u·w + 1, c, u·w · 2) along axis 1: the first two are gathered as one piece.
  GraphBuilder b;
  int u = b.Input("u", DType::kF32, {-1, kWidth});
  int c = b.Input("c", DType::kF32, {-1, kWidth});
  int w = b.Const("w", MakeF32({kWidth, kWidth}, std::vector<float>(kWidth * kWidth, 0.5f)));
  int one = b.Const("one", MakeF32({1}, {1.0f}));
  int two = b.Const("two", MakeF32({1}, {2.0f}));
  int a = b.Op("MatMul", {u, w});
  int a1 = b.Op("Add", {a, one});
  int a2 = b.Op("Mul", {a, two});
  b.Output(b.Op("Concat", {a, a1, c, a2}, {{"axis", int64_t{-1}}}));
  HoistReport r = ExpectHoistedScoresTheSame(b.graph(), 1, 5);
  EXPECT_TRUE(r.hoisted);
  EXPECT_EQ(r.gathered.size(), 2u) << "one for the run (a, a1), one for a2";
}

TEST(UserHoisting, NothingToHoistLeavesTheGraph) {
  GraphBuilder b;
  int u = b.Input("u", DType::kF32, {-1, kWidth});
  int c = b.Input("c", DType::kF32, {-1, kWidth});
  b.Output(b.Op("Relu", {b.Op("Concat", {u, c}, {{"axis", int64_t{1}}})}));
  HoistReport r = ExpectHoistedScoresTheSame(b.graph(), 1, 3);
  EXPECT_FALSE(r.hoisted);
  EXPECT_NE(r.why_not.find("nothing to hoist"), std::string::npos) << r.why_not;
}

// ---------------------------------------------------------------- the zoo's W2 and W3

StatusOr<std::unique_ptr<Model>> LoadZoo(const std::string& name, int hoisting, bool batching = false) {
  ModelOptions options;
  options.user_hoisting = hoisting;
  auto config = LoadModelConfig(testing::SourcePath("models/zoo/" + name));
  if (!config.ok()) return config.status();
  config->batching.enabled = batching;
  config->batching.cost_per_row = 1;
  config->batching.cost_per_sequence_element = 0;
  config->batching.cost_per_request = 10;
  config->batching.cost_budget = 1000;
  config->batching.max_queue_delay_microseconds = 200000;  // long enough for concurrent requests to meet
  config->name = name;
  return Model::LoadFile(testing::SourcePath("models/zoo/" + name + "/1/model.onnx"), std::move(*config), options);
}

// A request of `candidates` candidates with ids drawn in [0, 50) and ragged rows of random
// lengths from `min_length` (the user's sequences all of one length); user rows once, or
// repeated to every candidate.
InferRequest RandomRequest(const Model& model, int64_t candidates, uint64_t seed, bool user_per_candidate = false,
                           int64_t min_length = 0) {
  std::mt19937_64 rng(seed);
  InferRequest r;
  int64_t user_length = std::uniform_int_distribution<int64_t>(min_length, 1000)(rng);
  for (const InputConfig& in : model.config().inputs) {
    bool user = in.scope == InputScope::kUser;
    int64_t rows = user && !user_per_candidate ? 1 : candidates;
    InferInput x;
    x.name = in.name;
    if (in.ragged) {
      int64_t len = std::min(user_length, in.max_length);
      for (int64_t i = 0; i < rows; ++i) {
        x.lengths.push_back(user ? len : std::uniform_int_distribution<int64_t>(min_length, in.max_length)(rng));
      }
      int64_t total = 0;
      for (int64_t l : x.lengths) total += l;
      x.data = Tensor::Zeros(in.dtype, {total});
    } else {
      Shape s{rows};
      for (int64_t d : in.dims) s.push_back(d);
      x.data = Tensor::Zeros(in.dtype, s);
    }
    std::uniform_int_distribution<int64_t> id(0, 49);
    int64_t per_row = rows > 0 ? x.data.size() / std::max<int64_t>(rows, 1) : 0;
    for (int64_t i = 0; i < x.data.size(); ++i) {
      // A user's rows are the same row repeated.
      if (user && user_per_candidate && !in.ragged && i >= per_row) {
        x.data.data<int64_t>()[i] = x.data.data<int64_t>()[i % per_row];
      } else if (user && user_per_candidate && in.ragged && i >= x.lengths[0]) {
        x.data.data<int64_t>()[i] = x.data.data<int64_t>()[i % std::max<int64_t>(x.lengths[0], 1)];
      } else {
        x.data.data<int64_t>()[i] = id(rng);
      }
    }
    r.inputs.push_back(std::move(x));
  }
  return r;
}

class HoistedZooTest : public ::testing::TestWithParam<const char*> {};

TEST_P(HoistedZooTest, ScoresTheSameWithAndWithoutHoisting) {
  auto on = LoadZoo(GetParam(), 1);
  auto off = LoadZoo(GetParam(), 0);
  ASSERT_TRUE(on.ok() && off.ok()) << on.status().ToString() << off.status().ToString();
  EXPECT_EQ((*on)->load_report().hoisting.rfind("on:", 0), 0u) << (*on)->load_report().hoisting;
  EXPECT_EQ((*off)->load_report().hoisting, "off (config)");
  // Fewer graph inputs are per candidate: the user ones are per user, plus the request index.
  EXPECT_EQ((*on)->graph().inputs.size(), (*off)->graph().inputs.size() + 1);
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    InferRequest r = RandomRequest(**on, 1 + static_cast<int64_t>(seed * 5 % 23), seed, seed % 3 == 0);
    auto a = (*on)->Infer(r);
    auto b = (*off)->Infer(r);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
    for (size_t o = 0; o < b->size(); ++o) {
      EXPECT_LE(testing::RelativeError((*a)[o].data, (*b)[o].data), 1e-6) << "seed " << seed;
    }
  }
  testing::ExpectZooScores(**on, GetParam(), 1e-5);
}

TEST_P(HoistedZooTest, MergedUsersScoreAsTheyDoAlone) {
  // Requests of different users arrive together and run merged (user rows stacked, request
  // indices shifted); each scores as the graph as written scores it alone.
  auto model = LoadZoo(GetParam(), 1, /*batching=*/true);
  auto unhoisted = LoadZoo(GetParam(), 0);
  ASSERT_TRUE(model.ok() && unhoisted.ok()) << model.status().ToString();
  constexpr int kRequests = 6;
  std::vector<InferRequest> requests;
  // Sequences of at least one id: a fully masked attention (an empty sequence) depends on how far
  // it is padded, merged or not.
  for (int k = 0; k < kRequests; ++k) {
    requests.push_back(RandomRequest(**model, 2 + k, 100 + static_cast<uint64_t>(k), false, /*min_length=*/1));
  }
  // Queued from one thread without waiting (InferAsync) behind a request of many candidates that
  // runs meanwhile: a small request runs faster than the next is built, so without it each found
  // the batcher idle and ran at once, alone (on a loaded CI machine, every round). A machine loaded
  // enough to finish even that before the six are queued gets more rounds.
  auto blocker = std::make_shared<ParsedRequest>();
  blocker->request = RandomRequest(**model, 4000, 99, false, /*min_length=*/1);
  int largest_batch = 0;
  for (int round = 0; round < 5 && largest_batch <= 1; ++round) {
    std::promise<bool> blocker_answered;
    (*model)->InferAsync(blocker, [&blocker_answered](StatusOr<std::vector<InferOutput>> outputs, const InferStats&) {
      blocker_answered.set_value(outputs.ok());
    });
    std::vector<std::promise<std::pair<StatusOr<std::vector<InferOutput>>, InferStats>>> answers(kRequests);
    std::vector<std::future<std::pair<StatusOr<std::vector<InferOutput>>, InferStats>>> futures;
    std::vector<std::shared_ptr<ParsedRequest>> parsed;
    for (int k = 0; k < kRequests; ++k) {
      futures.push_back(answers[static_cast<size_t>(k)].get_future());
      auto r = std::make_shared<ParsedRequest>();
      r->request = requests[static_cast<size_t>(k)];
      parsed.push_back(r);
    }
    for (int k = 0; k < kRequests; ++k) {
      (*model)->InferAsync(parsed[static_cast<size_t>(k)],
                           [&answers, k](StatusOr<std::vector<InferOutput>> outputs, const InferStats& stats) {
                             answers[static_cast<size_t>(k)].set_value({std::move(outputs), stats});
                           });
    }
    for (int k = 0; k < kRequests; ++k) {
      auto [got, stats] = futures[static_cast<size_t>(k)].get();
      auto want = (*unhoisted)->Infer(requests[static_cast<size_t>(k)]);
      // Not ASSERT: returning now would leave queued callbacks setting destroyed promises.
      EXPECT_TRUE(got.ok() && want.ok()) << got.status().ToString();
      if (!got.ok() || !want.ok()) continue;
      EXPECT_LE(testing::RelativeError((*got)[0].data, (*want)[0].data), 1e-6)
          << "request " << k << ", round " << round;
      largest_batch = std::max(largest_batch, stats.batch_requests);
    }
    EXPECT_TRUE(blocker_answered.get_future().get());
  }
  EXPECT_GT(largest_batch, 1) << "no requests were merged in five rounds";
}

INSTANTIATE_TEST_SUITE_P(Zoo, HoistedZooTest, ::testing::Values("din", "bst", "bst_opset13"));

TEST(UserHoisting, ModelsWithoutUserInputsAreNotHoisted) {
  auto model = LoadZoo("dlrm_dcnv2", -1);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ((*model)->load_report().hoisting, "off (no user inputs)");
}

TEST(UserHoisting, BucketsPadUserRowsToTheirOwnSize) {
  // A user dense input, a candidate dense input, a user ragged input, the request index.
  std::vector<GraphInputKind> kinds = {{GraphInputKind::kDense, -1, true},
                                       {GraphInputKind::kDense, -1, false},
                                       {GraphInputKind::kValues, 0, true},
                                       {GraphInputKind::kOffsets, 0, true},
                                       {GraphInputKind::kRequestIndex, -1, false}};
  PreparedRequest p;
  p.rows = 3;
  p.users = 2;
  p.ragged_max_lengths = {2};
  p.inputs = {MakeF32({2, 1}, {10, 20}), MakeF32({3, 1}, {1, 2, 3}), MakeI64({3}, {7, 8, 9}), MakeI64({3}, {0, 2, 3}),
              MakeI64({3}, {0, 1, 1})};
  ShapeBuckets buckets({1, 2, 4, 8}, {{2, 4}}, {1, 2, 4, 8});
  auto key = buckets.Find(p.rows, p.ragged_max_lengths, p.users);
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->ToString(), "rows=4 lengths=[2] users=2");
  key->users = 4;  // pad the users too
  PreparedRequest padded = PadToBucket(p, *key, kinds);
  EXPECT_EQ(padded.users, 4);
  EXPECT_EQ(padded.inputs[0].shape(), Shape({4, 1}));
  EXPECT_EQ(padded.inputs[1].shape(), Shape({4, 1}));
  EXPECT_EQ(std::vector<int64_t>(padded.inputs[2].data<int64_t>(), padded.inputs[2].data<int64_t>() + 8),
            std::vector<int64_t>({7, 8, 9, -1, -1, -1, -1, -1}));
  EXPECT_EQ(padded.inputs[3].shape(), Shape({5}));  // users + 1 offsets
  EXPECT_EQ(std::vector<int64_t>(padded.inputs[4].data<int64_t>(), padded.inputs[4].data<int64_t>() + 4),
            std::vector<int64_t>({0, 1, 1, 0}));  // the padded candidate belongs to user 0
}

TEST(UserHoisting, ConfigKnob) {
  EXPECT_TRUE(ParseModelConfig("{}", false)->user_hoisting);
  EXPECT_FALSE(ParseModelConfig("user_hoisting: false", true)->user_hoisting);
  auto bad = ParseModelConfig(R"({"user_hoisting": "yes"})", false);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("user_hoisting must be true or false"), std::string::npos);
}

TEST(UserHoisting, MergeShiftsRequestIndicesByTheUsersBefore) {
  std::vector<GraphInputKind> kinds = {{GraphInputKind::kDense, -1, true},
                                       {GraphInputKind::kDense, -1, false},
                                       {GraphInputKind::kRequestIndex, -1, false}};
  PreparedRequest a, b;
  a.rows = 2;
  a.users = 1;
  a.inputs = {MakeF32({1, 1}, {10}), MakeF32({2, 1}, {1, 2}), MakeI64({2}, {0, 0})};
  b.rows = 3;
  b.users = 2;
  b.inputs = {MakeF32({2, 1}, {20, 30}), MakeF32({3, 1}, {3, 4, 5}), MakeI64({3}, {0, 1, 1})};
  PreparedRequest m = MergeRequests({&a, &b}, kinds);
  EXPECT_EQ(m.rows, 5);
  EXPECT_EQ(m.users, 3);
  EXPECT_EQ(m.inputs[0].shape(), Shape({3, 1}));
  EXPECT_EQ(std::vector<int64_t>(m.inputs[2].data<int64_t>(), m.inputs[2].data<int64_t>() + 5),
            std::vector<int64_t>({0, 0, 1, 2, 2}));
}

}  // namespace
}  // namespace rankd
