// Shape buckets: finding a bucket, padding and cutting back (unit), padding invariance on every
// zoo model against PyTorch's scores, refusal of graphs that mix rows, and, on a GPU, captured
// graphs against the uncaptured path and a miss captured in the background.
#include "serving/shape_buckets.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "serving/model.h"
#include "test_util.h"

#if RANKD_HAVE_CUDA
#include "backend/cuda/gemm.h"
#include "runtime/cuda/cuda_executor.h"
#endif

namespace rankd {
namespace {

TEST(ShapeBuckets, GeometricSizesStepByEighthsOfAnOctave) {
  EXPECT_EQ(ShapeBuckets::Geometric(1), std::vector<int64_t>({1}));
  EXPECT_EQ(ShapeBuckets::Geometric(20),
            std::vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20}));
  auto big = ShapeBuckets::Geometric(65536);
  EXPECT_EQ(big.back(), 65536);
  for (size_t i = 1; i < big.size(); ++i) EXPECT_LE(big[i], big[i - 1] * 9 / 8 + 1) << big[i];  // <= 12.5% padding
  EXPECT_LT(big.size(), 130u);
}

TEST(ShapeBuckets, FindsTheSmallestBucketHoldingTheRequest) {
  ShapeBuckets b({64, 1, 8}, {ShapeBuckets::AllowedLengths({}, 20), ShapeBuckets::AllowedLengths({}, 3)});
  EXPECT_EQ(b.rows(), std::vector<int64_t>({1, 8, 64}));
  EXPECT_EQ(b.lengths()[0], std::vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20}));
  EXPECT_EQ(b.lengths()[1], std::vector<int64_t>({1, 2, 3}));
  auto key = b.Find(5, {19, 0});
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->rows, 8);
  EXPECT_EQ(key->lengths, std::vector<int64_t>({20, 1}));  // an empty longest row still gets one slot
  EXPECT_EQ(b.Find(2, {17, 2})->lengths, std::vector<int64_t>({18, 2}));
  EXPECT_EQ(key->ToString(), "rows=8 lengths=[20,1]");
  EXPECT_EQ(b.Find(8, {1, 3})->rows, 8);
  EXPECT_FALSE(b.Find(65, {1, 1}).has_value());  // beyond the largest: runs at its own shape
  // Configured lengths are cut at max_length, which is always allowed.
  EXPECT_EQ(ShapeBuckets::AllowedLengths({50, 5}, 20), std::vector<int64_t>({5, 20}));
  // An input without allowed lengths keeps the request's own longest row, even an empty one.
  ShapeBuckets exact({4}, {{}});
  EXPECT_EQ(exact.Find(3, {0})->lengths, std::vector<int64_t>({0}));
  EXPECT_EQ(exact.Find(3, {7})->lengths, std::vector<int64_t>({7}));
  // An input kept at its own length only when a row has no id: bucketed otherwise.
  ShapeBuckets idless({4}, {{4, 8}, {4, 8}}, {}, {true, false});
  const std::vector<bool> both = {true, true}, none = {false, false};
  EXPECT_EQ(idless.Find(3, {3, 3}, 0, &none)->lengths, std::vector<int64_t>({4, 4}));
  EXPECT_EQ(idless.Find(3, {3, 3}, 0, &both)->lengths, std::vector<int64_t>({3, 4}));
  EXPECT_EQ(idless.Find(3, {5, 5})->lengths, std::vector<int64_t>({8, 8}));  // not scanned: bucketed
}

TEST(ShapeBuckets, RowsWithoutIdsAreEmptyOrOnlyMinusOnes) {
  std::vector<GraphInputKind> kinds = {{GraphInputKind::kValues, 0},
                                       {GraphInputKind::kOffsets, 0},
                                       {GraphInputKind::kValues, 1},
                                       {GraphInputKind::kOffsets, 1}};
  PreparedRequest p;
  p.inputs = {testing::MakeI64({4}, {5, -1, 0, 2}), testing::MakeI64({3}, {0, 2, 4}),  // rows [5,-1] [0,2]
              testing::MakeI64({3}, {-1, -1, 7}), testing::MakeI64({3}, {0, 2, 3})};   // rows [-1,-1] [7]
  EXPECT_EQ(RowsWithoutIds(p, kinds, {true, true}), std::vector<bool>({false, true}));
  EXPECT_EQ(RowsWithoutIds(p, kinds, {true, false}), std::vector<bool>({false, false}));  // 1 not scanned
  p.inputs[1] = testing::MakeI64({4}, {0, 2, 2, 4});                                      // an empty middle row
  EXPECT_EQ(RowsWithoutIds(p, kinds, {true, true}), std::vector<bool>({true, true}));
  p.inputs[2] = Tensor::FromVector<int32_t>(DType::kI32, {3}, {3, 4, 7});  // INT32 ids, every row has one
  EXPECT_EQ(RowsWithoutIds(p, kinds, {true, true}), std::vector<bool>({true, false}));
}

// What MergeNow asks of a batch before merging it: from the parts, the rows without ids the
// merged batch would have.
TEST(ShapeBuckets, RowsWithoutIdsOfPartsAreThoseOfTheirMerge) {
  const std::vector<GraphInputKind> kinds = {{GraphInputKind::kValues, 0},
                                             {GraphInputKind::kOffsets, 0},
                                             {GraphInputKind::kValues, 1},
                                             {GraphInputKind::kOffsets, 1}};
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> pick(0, 5);
  int idless_batches = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<PreparedRequest> requests(static_cast<size_t>(1 + pick(rng) % 4));
    for (PreparedRequest& p : requests) {
      p.rows = 1 + pick(rng);
      for (int input = 0; input < 2; ++input) {
        std::vector<int64_t> values, offsets{0};
        for (int64_t r = 0; r < p.rows; ++r) {
          for (int n = pick(rng) % 3; n > 0; --n) values.push_back(pick(rng) < 4 ? pick(rng) : -1);
          // Rows without ids are rare, so that most batches have none.
          if (values.size() == static_cast<size_t>(offsets.back()) && pick(rng) > 1) values.push_back(pick(rng));
          offsets.push_back(static_cast<int64_t>(values.size()));
        }
        p.inputs.push_back(testing::MakeI64({static_cast<int64_t>(values.size())}, values));
        p.inputs.push_back(testing::MakeI64({p.rows + 1}, offsets));
      }
      p.ragged_max_lengths = {2, 2};
    }
    std::vector<const PreparedRequest*> parts;
    for (const PreparedRequest& p : requests) parts.push_back(&p);
    const PreparedRequest merged = MergeRequests(parts, kinds);
    for (const std::vector<bool>& which : {std::vector<bool>{true, true}, std::vector<bool>{false, true}}) {
      const std::vector<bool> want = RowsWithoutIds(merged, kinds, which);
      EXPECT_EQ(RowsWithoutIds(parts, kinds, which), want) << "trial " << trial;
      idless_batches += want[1];
    }
  }
  EXPECT_GT(idless_batches, 40);
  EXPECT_LT(idless_batches, 360);
}

TEST(ShapeBuckets, WarmupKeysWalkRowsAndLengthLevels) {
  ShapeBuckets b({1, 3, 4, 16}, {{1, 2, 3, 4}, {1}, {}});
  auto keys = b.WarmupKeys(4, {4, 1, 3});
  ASSERT_EQ(keys.size(), 6u);  // rows 1 and 4 (3 waits for first use), length levels 1, 2, 4
  EXPECT_EQ(keys[0].ToString(), "rows=1 lengths=[1,1,1]");
  EXPECT_EQ(keys[2].ToString(), "rows=1 lengths=[4,1,3]");  // the third: the level's length, up to its max
  EXPECT_EQ(keys[5].ToString(), "rows=4 lengths=[4,1,3]");
  EXPECT_TRUE(ShapeBuckets({8}, {}).WarmupKeys(4, {}).empty());
}

TEST(ShapeBuckets, InputsAlreadyInTheBucketsShapeAreNotCopied) {
  PreparedRequest p;
  p.rows = 2;
  p.ragged_max_lengths = {2};
  p.inputs.push_back(testing::MakeF32({2, 1}, {1, 2}));
  p.inputs.push_back(testing::MakeI64({4}, {7, 8, 9, 5}));  // two rows of two ids
  p.inputs.push_back(testing::MakeI64({3}, {0, 2, 4}));
  std::vector<GraphInputKind> kinds = {
      {GraphInputKind::kDense, -1}, {GraphInputKind::kValues, 0}, {GraphInputKind::kOffsets, 0}};
  PreparedRequest same = PadToBucket(p, BucketKey{2, {2}}, kinds);
  EXPECT_EQ(same.inputs[0].raw(), p.inputs[0].raw());
  EXPECT_EQ(same.inputs[1].raw(), p.inputs[1].raw());
  EXPECT_EQ(same.inputs[2].raw(), p.inputs[2].raw());
  PreparedRequest more = PadToBucket(p, BucketKey{3, {2}}, kinds);  // one copy and -1s, an empty row
  std::vector<int64_t> values(more.inputs[1].data<int64_t>(), more.inputs[1].data<int64_t>() + 6);
  EXPECT_EQ(values, std::vector<int64_t>({7, 8, 9, 5, -1, -1}));
  std::vector<int64_t> offsets(more.inputs[2].data<int64_t>(), more.inputs[2].data<int64_t>() + 4);
  EXPECT_EQ(offsets, std::vector<int64_t>({0, 2, 4, 4}));
}

// FitsBucket says whether PadToBucket would view every input whole as it is (then the request's
// own inputs run): rows and users as the bucket's, offsets from 0, ids filling their slots or,
// for an executor that fills ragged tails, ending where the offsets do.
TEST(ShapeBuckets, ARequestFitsItsBucketWhenPaddingWouldOnlyViewIt) {
  PreparedRequest p;
  p.rows = 2;
  p.ragged_max_lengths = {2};
  p.inputs.push_back(testing::MakeF32({2, 1}, {1, 2}));
  p.inputs.push_back(testing::MakeI64({3}, {7, 8, 9}));  // rows [7] and [8, 9]
  p.inputs.push_back(testing::MakeI64({3}, {0, 1, 3}));
  std::vector<GraphInputKind> kinds = {
      {GraphInputKind::kDense, -1}, {GraphInputKind::kValues, 0}, {GraphInputKind::kOffsets, 0}};
  auto viewed_whole = [&](const BucketKey& key, bool ids_unpadded) {
    PreparedRequest padded = PadToBucket(p, key, kinds, ids_unpadded);
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      if (padded.inputs[i].raw() != p.inputs[i].raw() || padded.inputs[i].shape() != p.inputs[i].shape()) return false;
    }
    return true;
  };
  for (bool ids_unpadded : {false, true}) {
    for (const BucketKey& key : {BucketKey{2, {2}}, BucketKey{2, {4}}, BucketKey{4, {2}}, BucketKey{4, {4}}}) {
      EXPECT_EQ(FitsBucket(p, key, kinds, ids_unpadded), viewed_whole(key, ids_unpadded))
          << key.ToString() << (ids_unpadded ? ", ids unpadded" : "");
    }
  }
  EXPECT_TRUE(FitsBucket(p, BucketKey{2, {2}}, kinds, true));    // the ids end where the offsets do
  EXPECT_FALSE(FitsBucket(p, BucketKey{2, {2}}, kinds, false));  // 3 ids in 4 slots: padded with -1
  EXPECT_FALSE(FitsBucket(p, BucketKey{4, {2}}, kinds, true));   // rows to add
  p.inputs[1] = testing::MakeI64({4}, {7, 8, 9, 5});             // full rows
  p.inputs[2] = testing::MakeI64({3}, {0, 2, 4});
  EXPECT_TRUE(FitsBucket(p, BucketKey{2, {2}}, kinds, false));
  EXPECT_TRUE(viewed_whole(BucketKey{2, {2}}, false));
  p.inputs[2] = testing::MakeI64({3}, {1, 2, 4});  // offsets not from 0: the ids are moved
  EXPECT_FALSE(FitsBucket(p, BucketKey{2, {2}}, kinds, true));
  EXPECT_FALSE(viewed_whole(BucketKey{2, {2}}, true));
}

TEST(ShapeBuckets, PadsDenseRowsWithZerosAndRaggedSlotsWithMinusOne) {
  PreparedRequest p;
  p.rows = 2;
  p.ragged_max_lengths = {3};
  p.inputs.push_back(testing::MakeF32({2, 2}, {1, 2, 3, 4}));
  p.inputs.push_back(testing::MakeI64({4}, {7, 8, 9, 5}));  // rows [7] and [8, 9, 5]
  p.inputs.push_back(testing::MakeI64({3}, {0, 1, 4}));
  std::vector<GraphInputKind> kinds = {
      {GraphInputKind::kDense, -1}, {GraphInputKind::kValues, 0}, {GraphInputKind::kOffsets, 0}};
  PreparedRequest q = PadToBucket(p, BucketKey{4, {4}}, kinds);
  EXPECT_EQ(q.rows, 4);
  EXPECT_EQ(q.ragged_max_lengths, std::vector<int64_t>({4}));
  ASSERT_EQ(q.inputs[0].shape(), Shape({4, 2}));
  std::vector<float> dense(q.inputs[0].data<float>(), q.inputs[0].data<float>() + 8);
  EXPECT_EQ(dense, std::vector<float>({1, 2, 3, 4, 0, 0, 0, 0}));
  ASSERT_EQ(q.inputs[1].shape(), Shape({16}));
  std::vector<int64_t> values(q.inputs[1].data<int64_t>(), q.inputs[1].data<int64_t>() + 16);
  EXPECT_EQ(values, std::vector<int64_t>({7, 8, 9, 5, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}));
  std::vector<int64_t> offsets(q.inputs[2].data<int64_t>(), q.inputs[2].data<int64_t>() + 5);
  EXPECT_EQ(offsets, std::vector<int64_t>({0, 1, 4, 4, 4}));  // the padded rows are empty

  // For an executor that fills ragged tails itself, the ids are viewed where they are; only the
  // offsets and dense rows are padded.
  PreparedRequest v = PadToBucket(p, BucketKey{4, {4}}, kinds, /*ids_unpadded=*/true);
  ASSERT_EQ(v.inputs[1].shape(), Shape({4}));
  EXPECT_EQ(v.inputs[1].raw(), p.inputs[1].raw());
  std::vector<int64_t> same_offsets(v.inputs[2].data<int64_t>(), v.inputs[2].data<int64_t>() + 5);
  EXPECT_EQ(same_offsets, offsets);
  ASSERT_EQ(v.inputs[0].shape(), Shape({4, 2}));

  std::vector<Tensor> cut = TakeRows({testing::MakeF32({4, 1}, {1, 2, 3, 4})}, 2);
  ASSERT_EQ(cut[0].shape(), Shape({2, 1}));
  EXPECT_EQ(cut[0].data<float>()[1], 2.0f);
}

TEST(ShapeBuckets, ConfigIsParsedAndCheckedByName) {
  auto c = ParseModelConfig(R"({"buckets": {"allowed_batch_sizes": [64, 8, 8], "allowed_lengths": [16],
                                           "cuda_graphs": false, "warmup_max_batch_size": 64}})",
                            false);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->buckets.enabled, 1);
  EXPECT_EQ(c->buckets.allowed_batch_sizes, std::vector<int64_t>({8, 64}));
  EXPECT_FALSE(c->buckets.cuda_graphs);
  EXPECT_EQ(c->buckets.warmup_max_batch_size, 64);
  EXPECT_EQ(ParseModelConfig("{}", false)->buckets.enabled, -1);
  for (const char* bad : {R"({"buckets": {"allowed_batch_sizes": [0]}})", R"({"buckets": {"allowed_batch_sizes": []}})",
                          R"({"buckets": {"cuda_graph": true}})", R"({"buckets": {"enabled": 1}})",
                          R"({"buckets": {"max_graph_memory_mb": -1}})", R"({"buckets": [1, 2]})"}) {
    auto parsed = ParseModelConfig(bad, false);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("buckets"), std::string::npos) << parsed.status().ToString();
  }
}

// A zoo model loaded with its own config, buckets set as given.
StatusOr<std::unique_ptr<Model>> LoadZoo(const std::string& name, int buckets, const Backend* backend,
                                         int64_t warmup_rows = 1024, std::vector<int64_t> rows = {},
                                         std::vector<int64_t> lengths = {}) {
  std::string dir = testing::SourcePath("models/zoo/" + name);
  RANKD_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));
  config.name = name;
  config.buckets.enabled = buckets;
  config.buckets.warmup_max_batch_size = warmup_rows;
  config.buckets.allowed_batch_sizes = std::move(rows);
  config.buckets.allowed_lengths = std::move(lengths);
  ModelOptions options;
  options.backend = backend;
  return Model::LoadFile(dir + "/1/model.onnx", std::move(config), options);
}

// Buckets are on; BST's sequence stays at its own length in a request with a user without
// history, who gets a fully masked softmax whose result depends on the padded width (as it does in
// PyTorch), and is bucketed in the others.
void ExpectBucketsOn(const Model& model) {
  const std::string& report = model.load_report().buckets;
  if (model.name().substr(0, 3) == "bst") {
    EXPECT_EQ(report.rfind("on, sequences at their own length when a row has no id: output", 0), 0u) << report;
  } else {
    EXPECT_EQ(report, "on");
  }
}

class BucketedZooTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BucketedZooTest, PaddedRequestsScoreAsPyTorchOnTheCpu) {
  auto model = LoadZoo(GetParam(), 1, &CpuBackend(), 1024, {16, 64});  // every request padded
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ExpectBucketsOn(**model);
  testing::ExpectZooScores(**model, GetParam(), 1e-5);
  BucketCounters c = (*model)->bucket_counters();
  EXPECT_GT(c.padded_rows, c.real_rows);         // the reference requests are not all powers of two
  EXPECT_EQ(c.graph_hits + c.graph_misses, 0u);  // nothing is captured on the CPU
}

TEST_P(BucketedZooTest, CapturedGraphsScoreAsPyTorchOnTheGpu) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  auto model = LoadZoo(GetParam(), -1, cuda);  // the GPU's default: buckets and graphs on
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ExpectBucketsOn(**model);
  EXPECT_GT((*model)->load_report().warmup_captures, 0);
  testing::ExpectZooScores(**model, GetParam(), 1e-5);
  // Shapes that missed were captured in the background: a second pass replays graphs only.
  (*model)->WaitForCaptures();
  BucketCounters first = (*model)->bucket_counters();
  testing::ExpectZooScores(**model, GetParam(), 1e-5);
  BucketCounters second = (*model)->bucket_counters();
  EXPECT_EQ(second.graph_misses, first.graph_misses);
  EXPECT_GT(second.graph_hits, first.graph_hits);
  // The same requests on the uncaptured path, at their own shapes.
  auto plain = LoadZoo(GetParam(), 0, cuda);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ((*plain)->load_report().buckets, "off (config)");
  testing::ExpectZooScores(**plain, GetParam(), 1e-5);
}

// The plan the batcher looks up for a bucket (MergeNow) is the one a request padded to it runs.
TEST_P(BucketedZooTest, ABucketsPlanIsThePlanItsRequestsRun) {
  auto model = LoadZoo(GetParam(), 1, &CpuBackend(), 1024, {16, 64});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<int64_t> lengths;  // ExampleRequest's rows: 2 ids, or fewer where at most fewer fit
  for (const auto& in : (*model)->config().inputs) {
    if (in.ragged) lengths.push_back(std::min<int64_t>(2, in.max_length));
  }
  for (int64_t rows : {3, 40}) {
    auto key = (*model)->shape_buckets()->Find(rows, lengths, 1);
    ASSERT_TRUE(key.has_value());
    auto by_key = (*model)->PlanForBucket(*key);
    ASSERT_TRUE(by_key.ok()) << by_key.status().ToString();
    auto again = (*model)->PlanForBucket(*key);  // remembered: no example padded
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(by_key->get(), again->get());
    auto by_request = (*model)->PlanForRequest((*model)->ExampleRequest(rows, 2));
    ASSERT_TRUE(by_request.ok()) << by_request.status().ToString();
    EXPECT_EQ(by_key->get(), by_request->get()) << key->ToString();
  }
}

// BST's sequence is bucketed when every user has history and kept at its own length when one has
// none; both score as the model without buckets.
TEST(BucketedModel, BstSequencesAreBucketedUnlessAUserHasNoHistory) {
  auto padded = LoadZoo("bst", 1, &CpuBackend(), 1024, {1, 16, 64}, {8});  // lengths 8 and 12 (max_length)
  auto plain = LoadZoo("bst", 0, &CpuBackend());
  ASSERT_TRUE(padded.ok() && plain.ok()) << padded.status().ToString() << plain.status().ToString();
  ExpectBucketsOn(**padded);
  std::mt19937 rng(11);
  for (int64_t seq_length : {int64_t{5}, int64_t{0}}) {
    InferRequest r = (*padded)->ExampleRequest(3, 5);
    for (InferInput& in : r.inputs) {
      for (int64_t i = 0; i < in.data.size(); ++i) in.data.data<int64_t>()[i] = static_cast<int64_t>(rng() % 50);
      if (in.name == "seq" && seq_length == 0) {  // the user's history: all -1, no id
        for (int64_t i = 0; i < in.data.size(); ++i) in.data.data<int64_t>()[i] = -1;
      }
    }
    auto want = (*plain)->Infer(r);
    auto got = (*padded)->Infer(r);
    ASSERT_TRUE(want.ok() && got.ok()) << want.status().ToString() << got.status().ToString();
    EXPECT_LT(testing::RelativeError((*got)[0].data, (*want)[0].data), 1e-5) << "history of " << seq_length;
    auto plan = (*padded)->PlanForRequest(r);
    ASSERT_TRUE(plan.ok());
    const int values = (*plan)->graph().FindValue("seq.values");
    ASSERT_GE(values, 0);
    // The user's sequence: 8 slots (length bucket 8) with history, its own 5 without.
    EXPECT_EQ(ShapeToString((*plan)->values()[static_cast<size_t>(values)].shape), seq_length > 0 ? "[8]" : "[5]")
        << "history of " << seq_length;
  }
  // A history of no slots at all keeps its own length, 0, shorter than any bucket's rows were
  // ever built with: the bucket's plan and the run agree with the model without buckets.
  InferRequest empty = (*padded)->ExampleRequest(3, 0);
  auto want = (*plain)->Infer(empty);
  auto got = (*padded)->Infer(empty);
  ASSERT_EQ(got.ok(), want.ok()) << got.status().ToString() << want.status().ToString();
  if (want.ok()) {
    EXPECT_LT(testing::RelativeError((*got)[0].data, (*want)[0].data), 1e-5);
  }
  auto plan = (*padded)->PlanForRequest(empty);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(ShapeToString((*plan)->values()[static_cast<size_t>((*plan)->graph().FindValue("seq.values"))].shape),
            "[0]");
}

#if RANKD_HAVE_CUDA
// Captures with steps on several lanes (runtime/step_lanes.h) score as captures on one stream,
// in fp32, bf16 and bf16-activations, with as many kernels; DIN's and BST's graphs have fewer
// kernels in a row than in all.
TEST_P(BucketedZooTest, CapturesOnLanesScoreAsOnOneStream) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  struct Restore {  // the lanes as they were; products keep the heuristic's first algorithm,
                    // as a timed choice may differ between the two models (split-K or not)
    int lanes = cuda::GraphLanes();
    Restore() { cuda::EnableGemmTuning(false); }
    ~Restore() {
      cuda::SetGraphLanes(lanes);
      cuda::EnableGemmTuning(true);
    }
  } restore;
  // bf16-activations: a MulAdd's lane must also wait for the copy its addend reads.
  for (const char* precision : {"fp32", "bf16", "bf16-activations"}) {
    std::vector<std::unique_ptr<Model>> models;
    for (int lanes : {1, 4}) {
      cuda::SetGraphLanes(lanes);
      std::string dir = testing::SourcePath("models/zoo/" + GetParam());
      auto config = LoadModelConfig(dir);
      ASSERT_TRUE(config.ok());
      config->name = GetParam();
      config->precision = precision;
      config->buckets.warmup_max_batch_size = 64;
      ModelOptions options;
      options.backend = cuda;
      auto model = Model::LoadFile(dir + "/1/model.onnx", std::move(*config), options);
      ASSERT_TRUE(model.ok()) << model.status().ToString();
      models.push_back(std::move(*model));
    }
    std::mt19937 rng(23);
    for (int64_t rows : {1, 37}) {
      InferRequest r = models[0]->ExampleRequest(rows, 7);
      for (InferInput& in : r.inputs) {
        if (in.data.dtype() != DType::kI64) continue;
        for (int64_t i = 0; i < in.data.size(); ++i) in.data.data<int64_t>()[i] = static_cast<int64_t>(rng() % 40);
      }
      auto one = models[0]->Infer(r);
      auto four = models[1]->Infer(r);
      ASSERT_TRUE(one.ok() && four.ok()) << one.status().ToString() << four.status().ToString();
      ASSERT_EQ(one->size(), four->size());
      for (size_t o = 0; o < one->size(); ++o) {
        EXPECT_LE(testing::RelativeError((*four)[o].data, (*one)[o].data), 1e-6)
            << precision << ", " << rows << " rows";
      }
      auto plan_one = models[0]->PlanForRequest(r);
      auto plan_four = models[1]->PlanForRequest(r);
      ASSERT_TRUE(plan_one.ok() && plan_four.ok());
      EXPECT_TRUE((*plan_four)->separate_rooms());
      auto l4 = models[1]->CountLaunches(**plan_four);
      ASSERT_TRUE(l4.ok()) << l4.status().ToString();
      cuda::SetGraphLanes(1);  // CountLaunches captures again: on one stream, as model 0 did
      auto l1_again = models[0]->CountLaunches(**plan_one);
      cuda::SetGraphLanes(4);
      ASSERT_TRUE(l1_again.ok());
      EXPECT_EQ(l4->kernels, l1_again->kernels) << precision;
      EXPECT_EQ(l1_again->kernels_in_a_row, l1_again->kernels) << precision;
      if (GetParam() == "din" || GetParam().substr(0, 3) == "bst") {
        EXPECT_LT(l4->kernels_in_a_row, l4->kernels) << precision << ", " << rows << " rows";
      }
      EXPECT_LE(l4->kernels_in_a_row, l4->kernels);
    }
  }
}
#endif

INSTANTIATE_TEST_SUITE_P(Zoo, BucketedZooTest,
                         ::testing::Values("dlrm_dcnv2", "dlrm", "din", "bst", "bst_opset13", "mmoe"));

TEST(BucketedModel, MissRunsAtOnceAndIsCapturedInTheBackground) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  auto model = LoadZoo("din", -1, cuda, /*warmup_rows=*/4);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  InferRequest big = (*model)->ExampleRequest(100, 5);  // 128 rows: not captured at warm-up
  std::mt19937 rng(7);
  for (InferInput& in : big.inputs) {
    for (int64_t i = 0; i < in.data.size(); ++i) in.data.data<int64_t>()[i] = static_cast<int64_t>(rng() % 40);
  }
  BucketCounters before = (*model)->bucket_counters();
  auto first = (*model)->Infer(big);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  BucketCounters after_miss = (*model)->bucket_counters();
  EXPECT_EQ(after_miss.graph_misses, before.graph_misses + 1);
  (*model)->WaitForCaptures();
  BucketCounters captured = (*model)->bucket_counters();
  EXPECT_GT(captured.captures, after_miss.captures);  // the bucket was captured on every executor
  auto second = (*model)->Infer(big);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ((*model)->bucket_counters().graph_hits, captured.graph_hits + 1);
  EXPECT_EQ(testing::RelativeError((*first)[0].data, (*second)[0].data), 0.0);
}

TEST(BucketedModel, CapturesDroppedByAGrowingWorkspaceAreCapturedAgain) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  std::string dir = testing::SourcePath("models/zoo/din");
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok());
  config->name = "din";
  ModelOptions options;
  options.backend = cuda;
  options.executors = 1;  // every request on the same executor
  auto model = Model::LoadFile(dir + "/1/model.onnx", *config, options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  InferRequest small = (*model)->ExampleRequest(4, 4);  // a warm-up bucket
  // (The load's own runs, the batching cost model's timings among them, may have missed.)
  BucketCounters loaded = (*model)->bucket_counters();
  auto before = (*model)->Infer(small);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  BucketCounters c0 = (*model)->bucket_counters();
  EXPECT_EQ(c0.graph_misses, loaded.graph_misses);
  EXPECT_EQ(c0.graph_hits, loaded.graph_hits + 1);
  // Past the largest bucket: runs at its own shape and grows the executor's buffers, which drops
  // its captures.
  ASSERT_TRUE((*model)->Infer((*model)->ExampleRequest(3000, 20)).ok());
  auto missed = (*model)->Infer(small);
  ASSERT_TRUE(missed.ok());
  EXPECT_EQ((*model)->bucket_counters().graph_misses, c0.graph_misses + 1);
  (*model)->WaitForCaptures();
  BucketCounters c1 = (*model)->bucket_counters();
  auto replayed = (*model)->Infer(small);
  ASSERT_TRUE(replayed.ok());
  BucketCounters c2 = (*model)->bucket_counters();
  EXPECT_EQ(c2.graph_hits, c1.graph_hits + 1);
  EXPECT_EQ(c2.graph_misses, c1.graph_misses);
  EXPECT_EQ(testing::RelativeError((*before)[0].data, (*replayed)[0].data), 0.0);
}

// Background captures while another thread loads and drops models (device allocations, frees and
// synchronous copies, which invalidate a capture running at the same moment unless kept apart).
TEST(BucketedModel, CapturesSucceedWhileOtherModelsLoadAndUnload) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  auto model = LoadZoo("din", -1, cuda, /*warmup_rows=*/1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::atomic<bool> done{false};
  std::atomic<int> loads{0};
  std::thread churn([&] {
    while (!done) {
      auto other = LoadZoo("bst", 0, cuda);
      ASSERT_TRUE(other.ok()) << other.status().ToString();
      ASSERT_TRUE((*other)->Infer((*other)->ExampleRequest(3, 4)).ok());
      ++loads;
    }
  });
  BucketCounters before = (*model)->bucket_counters();
  for (int64_t rows = 2; rows <= 600; rows += rows / 8 + 1) {  // mostly a new bucket each
    auto scores = (*model)->Infer((*model)->ExampleRequest(rows, 3));
    ASSERT_TRUE(scores.ok()) << scores.status().ToString();
    (*model)->WaitForCaptures();
  }
  done = true;
  churn.join();
  BucketCounters after = (*model)->bucket_counters();
  uint64_t misses = after.graph_misses - before.graph_misses;
  EXPECT_GT(loads.load(), 0);
  EXPECT_GT(misses, 20u);
  EXPECT_EQ(after.capture_failures, 0u);
  EXPECT_GE(after.captures - before.captures, misses);  // each missed bucket, on every executor
}

TEST(BucketedModel, GraphThatMixesRowsIsRefusedOrRunsAtItsOwnShapes) {
  std::string path =
      testing::WriteRowMixingModel("mixes_rows_buckets/model.onnx");  // padding rows changes the real ones
  auto config =
      ParseModelConfig(R"({"inputs": [{"name": "x", "datatype": "FP32", "dims": [4]}], "buckets": {}})", false);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto model = Model::LoadFile(path, *config);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("changes when a request is padded"), std::string::npos)
      << model.status().ToString();
  if (const Backend* cuda = testing::CudaOrNull()) {  // the GPU's default: buckets turn off, the model loads
    config->buckets.enabled = -1;
    ModelOptions options;
    options.backend = cuda;
    auto loaded = Model::LoadFile(path, *config, options);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ((*loaded)->load_report().buckets.substr(0, 4), "off:");
  }
}

}  // namespace
}  // namespace rankd
