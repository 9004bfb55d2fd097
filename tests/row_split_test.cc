// A CPU run's rows split over the threads (serving/row_split.h, docs/engine.md): the parts a
// request becomes, the policy, and every zoo model scoring as PyTorch does with its rows split.
#include "serving/row_split.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "batching/batch_merge.h"
#include "common/parallel.h"
#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::MakeF32;
using testing::MakeI64;

TEST(SliceRequest, ViewsRowsAndMakesOffsetsAnew) {
  // Inputs: dense [4, 2]; ragged values and offsets (rows of 1, 0, 3, 2 ids); a user input of one
  // row; each candidate's user row.
  PreparedRequest whole;
  whole.inputs = {MakeF32({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7}), MakeI64({6}, {10, 11, 12, 13, 14, 15}),
                  MakeI64({5}, {0, 1, 1, 4, 6}), MakeF32({1, 3}, {9, 9, 9}), MakeI64({4}, {0, 0, 0, 0})};
  whole.rows = 4;
  whole.users = 1;
  whole.ragged_max_lengths = {3};
  whole.sequence_elements = 6;
  const std::vector<GraphInputKind> kinds = {{GraphInputKind::kDense, -1},
                                             {GraphInputKind::kValues, 0},
                                             {GraphInputKind::kOffsets, 0},
                                             {GraphInputKind::kDense, -1, true},
                                             {GraphInputKind::kRequestIndex, -1}};

  PreparedRequest part = SliceRequest(whole, kinds, 1, 2);  // rows 1 and 2: 0 and 3 ids
  EXPECT_EQ(part.rows, 2);
  EXPECT_EQ(part.users, 1);
  EXPECT_EQ(part.ragged_max_lengths, std::vector<int64_t>{3});
  EXPECT_EQ(part.sequence_elements, 3);
  ASSERT_EQ(part.inputs.size(), 5u);
  EXPECT_EQ(testing::RelativeError(part.inputs[0], MakeF32({2, 2}, {2, 3, 4, 5})), 0.0);
  EXPECT_EQ(part.inputs[0].data<float>(), whole.inputs[0].data<float>() + 2);  // a view
  EXPECT_EQ(testing::RelativeError(part.inputs[1], MakeI64({3}, {11, 12, 13})), 0.0);
  EXPECT_EQ(part.inputs[1].data<int64_t>(), whole.inputs[1].data<int64_t>() + 1);
  EXPECT_EQ(testing::RelativeError(part.inputs[2], MakeI64({3}, {0, 0, 3})), 0.0);
  EXPECT_EQ(part.inputs[3].data<float>(), whole.inputs[3].data<float>());  // the user's row, whole
  EXPECT_EQ(part.inputs[3].dim(0), 1);
  EXPECT_EQ(part.inputs[4].dim(0), 2);

  PreparedRequest last = SliceRequest(whole, kinds, 3, 1);
  EXPECT_EQ(last.ragged_max_lengths, std::vector<int64_t>{2});
  EXPECT_EQ(testing::RelativeError(last.inputs[1], MakeI64({2}, {14, 15})), 0.0);
  EXPECT_EQ(testing::RelativeError(last.inputs[2], MakeI64({2}, {0, 2})), 0.0);

  EXPECT_TRUE(CheckSliceable(whole, kinds).ok());
  PreparedRequest short_offsets = whole;
  short_offsets.inputs[2] = MakeI64({4}, {0, 1, 1, 4});  // rows, not rows + 1
  EXPECT_EQ(CheckSliceable(short_offsets, kinds).code(), StatusCode::kInternal);
  PreparedRequest past_values = whole;
  past_values.inputs[2] = MakeI64({5}, {0, 1, 1, 4, 7});  // 7 ids of 6
  EXPECT_EQ(CheckSliceable(past_values, kinds).code(), StatusCode::kInternal);
  PreparedRequest short_dense = whole;
  short_dense.inputs[0] = MakeF32({3, 2}, {0, 1, 2, 3, 4, 5});
  EXPECT_NE(CheckSliceable(short_dense, kinds).message().find("graph input 0"), std::string::npos);

  // The parts merged again are the whole.
  PreparedRequest first = SliceRequest(whole, kinds, 0, 1);
  PreparedRequest again = MergeRequests({&first, &part, &last}, kinds);
  for (size_t i : {0, 1, 2}) EXPECT_EQ(testing::RelativeError(again.inputs[i], whole.inputs[i]), 0.0) << i;
}

TEST(RowSplitPolicy, PartsFollowTheModeThreadsAndProbes) {
  RowSplitPolicy p;
  p.threads = 16;
  EXPECT_EQ(RowSplitParts(p, 512), 1);  // off
  p.mode = CpuRowSplit::kOn;
  EXPECT_EQ(RowSplitParts(p, 7), 1);  // one part of 4 rows or more
  EXPECT_EQ(RowSplitParts(p, 8), 2);
  EXPECT_EQ(RowSplitParts(p, 63), 15);
  EXPECT_EQ(RowSplitParts(p, 64), 16);
  EXPECT_EQ(RowSplitParts(p, 100000), 16);
  p.threads = 1;
  EXPECT_EQ(RowSplitParts(p, 64), 1);
  p.threads = 16;
  p.mode = CpuRowSplit::kAuto;
  EXPECT_EQ(RowSplitParts(p, 64), 1);  // nothing probed
  p.probes = {{64, 300, 100, true}, {256, 1000, 900, false}, {1024, 4000, 1000, true}};
  EXPECT_EQ(RowSplitParts(p, 8), 2);     // nearest: 64
  EXPECT_EQ(RowSplitParts(p, 120), 16);  // nearest: 64 (ratio 1.9 against 2.1)
  EXPECT_EQ(RowSplitParts(p, 140), 1);   // nearest: 256
  EXPECT_EQ(RowSplitParts(p, 600), 16);  // nearest: 1024
  EXPECT_EQ(RowSplitParts(p, 65536), 16);
  EXPECT_TRUE(RowSplitPays(100, 80));
  EXPECT_FALSE(RowSplitPays(100, 81));
}

TEST(RowSplitConfig, ParsesItsThreeModes) {
  for (const char* mode : {"auto", "on", "off"}) {
    auto config = ParseModelConfig(std::string(R"({"cpu_row_split": ")") + mode + "\"}", false);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    EXPECT_STREQ(CpuRowSplitName(config->cpu_row_split), mode);
  }
  auto bad = ParseModelConfig(R"({"cpu_row_split": "sometimes"})", false);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cpu_row_split must be auto, on or off"), std::string::npos);
  EXPECT_FALSE(ParseModelConfig(R"({"cpu_row_split": true})", false).ok());
}

StatusOr<std::unique_ptr<Model>> LoadZoo(const std::string& name, CpuRowSplit split) {
  ModelOptions options;
  options.cpu_row_split = split;
  options.batching = 0;  // each request runs as sent
  return Model::Load(testing::SourcePath("models/zoo/" + name), -1, options);
}

// Requests of `rows` rows: random dense values, ragged rows of lengths 0 to 3 (within their
// max_length), ids 0 to 2.
InferRequest MixedRequest(const Model& model, int64_t rows, uint32_t seed) {
  InferRequest r = model.ExampleRequest(rows, 3);
  RandomizeFloats(r, seed);
  for (InferInput& in : r.inputs) {
    if (in.is_bytes() || in.data.dtype() != DType::kI64) continue;
    if (static_cast<int64_t>(in.lengths.size()) == rows && rows > 1) {
      const int64_t longest = std::min<int64_t>(model.config().FindInput(in.name)->max_length, 3);
      int64_t total = 0;
      for (int64_t k = 0; k < rows; ++k) total += in.lengths[static_cast<size_t>(k)] = (k * 7 + seed) % (longest + 1);
      in.data = Tensor::Zeros(DType::kI64, {total});
    }
    for (int64_t k = 0; k < in.data.size(); ++k) in.data.data<int64_t>()[k] = (k * 5 + seed) % 3;
  }
  return r;
}

class RowSplitZoo : public ::testing::TestWithParam<std::string> {};

// Split into up to four parts, every zoo model scores PyTorch's reference requests within 1e-5,
// and requests of 8 to 64 rows (uneven parts, rows without ids) as with its rows whole.
TEST_P(RowSplitZoo, ScoresAsWithTheRowsWhole) {
  ScopedOmpThreads threads(4);
  auto split = LoadZoo(GetParam(), CpuRowSplit::kOn);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  EXPECT_EQ((*split)->load_report().row_split.rfind("on, up to 4 parts", 0), 0u) << (*split)->load_report().row_split;
  auto whole = LoadZoo(GetParam(), CpuRowSplit::kOff);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ((*whole)->load_report().row_split, "off");
  if (GetParam() != "mmoe_strings") testing::ExpectZooScores(**split, GetParam(), 1e-5);
  for (int64_t rows : {8, 9, 13, 33, 64}) {
    InferRequest request = MixedRequest(**whole, rows, static_cast<uint32_t>(rows));
    auto want = (*whole)->Infer(request);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto got = (*split)->Infer(request);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), want->size());
    for (size_t o = 0; o < want->size(); ++o) {
      EXPECT_EQ((*got)[o].data.shape(), (*want)[o].data.shape());
      EXPECT_LE(testing::RelativeError((*got)[o].data, (*want)[o].data), 1e-6) << rows << " rows, output " << o;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, RowSplitZoo,
                         ::testing::Values("dlrm", "dlrm_dcnv2", "din", "bst", "mmoe", "mmoe_strings"));

// An id out of range in one part fails its request, as it does whole; the next request scores.
TEST(RowSplitModel, IdOutOfRangeInOnePartFailsOnlyItsRequest) {
  ScopedOmpThreads threads(4);
  auto model = LoadZoo("mmoe", CpuRowSplit::kOn);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  InferRequest good = MixedRequest(**model, 16, 3);
  InferRequest bad = good;
  bad.inputs[0].data = good.inputs[0].data.Clone();
  ASSERT_EQ(bad.inputs[0].data.dtype(), DType::kI64);
  bad.inputs[0].data.data<int64_t>()[bad.inputs[0].data.size() - 1] = 1 << 30;  // the last part's
  auto refused = (*model)->Infer(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("out of range"), std::string::npos) << refused.status().ToString();
  EXPECT_TRUE((*model)->Infer(good).ok());
}

// Threads scoring at once on a model whose runs split: every answer as the model answers alone.
TEST(RowSplitModel, ConcurrentRequestsScoreAsAlone) {
  ScopedOmpThreads threads(4);
  auto model = LoadZoo("din", CpuRowSplit::kOn);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<InferRequest> requests;
  std::vector<std::vector<InferOutput>> want;
  for (uint32_t k = 0; k < 6; ++k) {
    requests.push_back(MixedRequest(**model, 8 + 5 * k, k));
    auto out = (*model)->Infer(requests.back());
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    want.push_back(std::move(*out));
  }
  testing::ScoredAtOnce r = testing::ScoreAtOnce(**model, requests, want, 4, 12);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.wrong, 0);
}

// With one OpenMP thread there is nothing to split over: the model loads whole, saying why.
TEST(RowSplitModel, OneThreadLeavesTheRowsWhole) {
  ScopedOmpThreads threads(1);
  auto model = LoadZoo("mmoe", CpuRowSplit::kOn);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->load_report().row_split, "off (one OpenMP thread or executor)");
  testing::ExpectZooScores(**model, "mmoe", 1e-5);
}

// Each part takes an executor: a model with two splits into two parts at most, and scores alike.
TEST(RowSplitModel, ExecutorsBoundTheParts) {
  ScopedOmpThreads threads(4);
  ModelOptions options;
  options.cpu_row_split = CpuRowSplit::kOn;
  options.batching = 0;
  options.executors = 2;
  auto model = Model::Load(testing::SourcePath("models/zoo/mmoe"), -1, options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->load_report().row_split.rfind("on, up to 2 parts", 0), 0u) << (*model)->load_report().row_split;
  testing::ExpectZooScores(**model, "mmoe", 1e-5);
}

// A graph that mixes its rows: `on` refuses to load, naming the output; `auto` loads whole.
TEST(RowSplitModel, GraphThatMixesRowsIsNotSplit) {
  ScopedOmpThreads threads(4);
  std::string path = testing::WriteRowMixingModel("mixes_rows_split/model.onnx");
  auto config = ParseModelConfig(R"({"inputs": [{"name": "x", "datatype": "FP32", "dims": [4]}],
                                     "batching": {"enabled": false}, "cpu_row_split": "on"})",
                                 false);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto refused = Model::LoadFile(path, *config);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("output 'y' changes when the rows are split"), std::string::npos)
      << refused.status().ToString();
  config->cpu_row_split = CpuRowSplit::kAuto;
  auto whole = Model::LoadFile(path, *config);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ((*whole)->load_report().row_split.rfind("off (output 'y' changes", 0), 0u)
      << (*whole)->load_report().row_split;
}

}  // namespace
}  // namespace rankd
