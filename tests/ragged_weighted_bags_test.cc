// TensorFlow's weighted lookups served from ragged ids and weights (compile/ragged_inputs.cc): a
// model whose graph takes padded ids and weights [rows, slots] (a weighted categorical column, as
// tf2onnx writes it; tests/tf_weighted_graphs.h) loaded with both inputs ragged, the weights
// `paired_with` the ids. Its bag reads both inputs' flat values and the ids' offsets (nothing
// padded), scores as TensorFlow's combiners over the same rows, alone and merged with other
// requests, on the CPU and on a GPU; a request whose two inputs do not line up, and a config or
// graph that would leave the weights beside the wrong slots, are refused.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "model/config.h"
#include "serving/model.h"
#include "test_util.h"
#include "tf_weighted_graphs.h"

namespace rankd {
namespace {

using testing::Expected;
using testing::Spelling;
using testing::WeightedGraph;

constexpr int64_t kSlots = 6;

std::string Config(const std::string& batching = "") {
  return "name: tf_weighted\ninputs:\n"
         "  - name: ids\n    datatype: INT64\n    ragged: true\n    max_length: 6\n"
         "  - name: weights\n    datatype: FP32\n    ragged: true\n    max_length: 6\n    paired_with: ids\n"
         "outputs:\n  - name: pooled\n" +
         batching;
}

std::string ModelFile(const Tensor& table, Spelling s) {
  s.counted = true;  // one row out per row of ids, empty rows included
  Graph built = WeightedGraph(table, s);
  built.values[static_cast<size_t>(built.outputs[0])].name = "pooled";
  return testing::WriteTempFile("tf_weighted_" + s.combiner + (s.safe ? "_safe" : "") + ".onnx",
                                testing::AsOnnx(built));
}

StatusOr<std::unique_ptr<Model>> Load(const std::string& path, const std::string& config_text, const Backend* backend) {
  auto config = ParseModelConfig(config_text, true);
  if (!config.ok()) return config.status();
  ModelOptions options;
  options.backend = backend;
  return Model::LoadFile(path, std::move(*config), options);
}

// A ragged request of `rows` rows of 0 to kSlots ids (the first row the longest, others empty),
// some negative (empty slots the safe lookup drops), weights in [-0.5, 2] (none 0), and the same
// rows padded with -1 ids and 0 weights for the reference.
struct RaggedRows {
  InferRequest request;
  Tensor padded_ids, padded_weights;
};
RaggedRows MakeRows(std::mt19937_64& rng, int64_t rows, int64_t table_rows) {
  std::vector<int64_t> ids, lengths, padded_ids;
  std::vector<float> weights, padded_weights;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t len = r == 0 ? kSlots : static_cast<int64_t>(rng() % (kSlots + 1));
    lengths.push_back(len);
    for (int64_t k = 0; k < kSlots; ++k) {
      const int64_t id = k >= len ? -1 : rng() % 9 == 0 ? -2 : static_cast<int64_t>(rng() % table_rows);
      float w = -0.5f + static_cast<float>(rng() % 11) * 0.25f;
      if (w == 0.0f) w = 1.5f;
      if (k < len) {
        ids.push_back(id);
        weights.push_back(w);
      }
      padded_ids.push_back(id);
      padded_weights.push_back(k < len ? w : 0.0f);
    }
  }
  RaggedRows out;
  const auto total = static_cast<int64_t>(ids.size());
  out.request.inputs.push_back({"ids", testing::MakeI64({total}, ids), lengths, {}});
  out.request.inputs.push_back({"weights", testing::MakeF32({total}, weights), lengths, {}});
  out.padded_ids = testing::MakeI64({rows, kSlots}, padded_ids);
  out.padded_weights = testing::MakeF32({rows, kSlots}, padded_weights);
  return out;
}

void ExpectScores(const std::vector<InferOutput>& got, const RaggedRows& rows, const Tensor& table, const Spelling& s,
                  const std::string& what) {
  const std::vector<float> want = Expected(table, rows.padded_ids, rows.padded_weights, s.combiner, s.Pruned());
  ASSERT_EQ(got[0].data.size(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[0].data.data<float>()[i], want[i], 1e-5) << what << " at " << i;
}

TEST(RaggedWeightedBags, TensorFlowsWeightedLookupsServeRaggedIdsAndWeights) {
  std::mt19937_64 rng(31);
  const Tensor table = testing::RandomTable(DType::kF32, 40, 8, rng);
  for (const auto& [combiner, safe] : {std::pair{"sum", false}, std::pair{"mean", false}, std::pair{"sqrtn", false},
                                       std::pair{"mean", true}, std::pair{"sum", true}}) {
    Spelling s;
    s.combiner = combiner;
    s.safe = safe;
    const std::string path = ModelFile(table, s);
    for (const Backend* backend : {&CpuBackend(), testing::CudaOrNull()}) {
      if (!backend) continue;
      const std::string what = std::string(combiner) + (safe ? " safe" : "") + " on " + backend->name();
      auto model = Load(path, Config(), backend);
      ASSERT_TRUE(model.ok()) << what << ": " << model.status().ToString();
      // One bag over the pair's flat values and the ids' offsets: nothing padded, no reshape.
      const Graph& g = (*model)->graph();
      EXPECT_EQ(testing::CountOps(g, "RaggedToPadded"), 0) << what;
      int bags = 0;
      for (const Node& n : g.nodes) {
        if (n.op != "EmbeddingBag") continue;
        ++bags;
        ASSERT_EQ(n.NumInputs(), 4) << what;
        EXPECT_EQ(g.values[static_cast<size_t>(n.inputs[1])].name, "ids.values") << what;
        EXPECT_EQ(g.values[static_cast<size_t>(n.inputs[2])].name, "ids.offsets") << what;
      }
      EXPECT_EQ(bags, 1) << what;
      for (int64_t rows : {1, 7, 300}) {
        const RaggedRows r = MakeRows(rng, rows, 40);
        auto out = (*model)->Infer(r.request);
        ASSERT_TRUE(out.ok()) << what << ": " << out.status().ToString();
        ExpectScores(*out, r, table, s, what + ", " + std::to_string(rows) + " rows");
      }
    }
  }
}

// A table of 40 rows and the model file of `combiner`'s weighted lookup over it.
struct TableAndFile {
  Tensor table;
  Spelling spelling;
  std::string path;
};
TableAndFile WeightedModelFile(std::mt19937_64& rng, int64_t width, const std::string& combiner) {
  TableAndFile f;
  f.table = testing::RandomTable(DType::kF32, 40, width, rng);
  f.spelling.combiner = combiner;
  f.path = ModelFile(f.table, f.spelling);
  return f;
}

// Requests queued together run merged (their values and lengths joined) and score as alone.
TEST(RaggedWeightedBags, MergedRequestsScoreAsAlone) {
  std::mt19937_64 rng(32);
  const auto [table, s, path] = WeightedModelFile(rng, 8, "sqrtn");
  auto model = Load(path,
                    Config("batching:\n  max_queue_delay_microseconds: 5000\n  executors: 1\n  cost_per_row: 1\n"
                           "  cost_per_sequence_element: 0\n  cost_per_request: 0\n  cost_budget: 100000\n"),
                    &CpuBackend());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  constexpr int kRequests = 24;
  std::vector<RaggedRows> rows;
  std::vector<std::optional<StatusOr<std::vector<InferOutput>>>> answers(kRequests);
  std::vector<int> batch_requests(kRequests, 0);
  for (int k = 0; k < kRequests; ++k) rows.push_back(MakeRows(rng, 1 + static_cast<int64_t>(rng() % 20), 40));
  for (int k = 0; k < kRequests; ++k) {
    auto r = std::make_shared<ParsedRequest>();
    r->request = rows[static_cast<size_t>(k)].request;
    (*model)->InferAsync(r,
                         [&answers, &batch_requests, k](StatusOr<std::vector<InferOutput>> out, const InferStats& st) {
                           answers[static_cast<size_t>(k)] = std::move(out);
                           batch_requests[static_cast<size_t>(k)] = static_cast<int>(st.batch_requests);
                         });
  }
  model->reset();  // drains the queue: every request answered
  int merged = 0;
  for (int k = 0; k < kRequests; ++k) {
    ASSERT_TRUE(answers[static_cast<size_t>(k)].has_value()) << k;
    ASSERT_TRUE(answers[static_cast<size_t>(k)]->ok()) << answers[static_cast<size_t>(k)]->status().ToString();
    ExpectScores(**answers[static_cast<size_t>(k)], rows[static_cast<size_t>(k)], table, s,
                 "request " + std::to_string(k));
    merged += batch_requests[static_cast<size_t>(k)] > 1;
  }
  // The executor takes the first requests alone as they come; how many before the queue builds
  // depends on the machine's timing (12 of 24 on a busy 2-core machine): at least one batch merged.
  EXPECT_GE(merged, 2);
}

// A request whose weights do not line up with its ids is refused naming both; so are configs
// that leave the weights unpaired, pair the wrong inputs, and a graph reading the weights other
// than as the bag's.
TEST(RaggedWeightedBags, WhatWouldMisalignTheWeightsIsRefused) {
  std::mt19937_64 rng(33);
  auto [table, s, path] = WeightedModelFile(rng, 4, "mean");
  auto model = Load(path, Config(), &CpuBackend());
  ASSERT_TRUE(model.ok()) << model.status().ToString();

  RaggedRows r = MakeRows(rng, 3, 40);
  InferRequest shifted = r.request;  // the same values, one length moved to the next row
  shifted.inputs[1].lengths[0] -= 1;
  shifted.inputs[1].lengths[1] += 1;
  auto refused = (*model)->Infer(shifted);
  ASSERT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("'ids' and 'weights' are paired"), std::string::npos)
      << refused.status().message();
  InferRequest padded_ids = r.request;  // ids as padded rows, weights flat
  padded_ids.inputs[0] = {"ids", r.padded_ids, {}, {}};
  EXPECT_EQ((*model)->Infer(padded_ids).status().code(), StatusCode::kInvalidArgument);
  InferRequest padded_weights = r.request;
  padded_weights.inputs[1] = {"weights", r.padded_weights, {}, {}};
  auto weights_2d = (*model)->Infer(padded_weights);
  EXPECT_NE(weights_2d.status().message().find("must be flat values with lengths"), std::string::npos)
      << weights_2d.status().ToString();
  EXPECT_TRUE((*model)->Infer(r.request).ok());  // and the model serves on

  // The ids ragged, the weights padded: the bag's weights would no longer be its ids' slots.
  auto unpaired = Load(path,
                       "name: tf_weighted\ninputs:\n  - name: ids\n    datatype: INT64\n    ragged: true\n"
                       "  - name: weights\n    datatype: FP32\n    dims: [6]\noutputs:\n  - name: pooled\n",
                       &CpuBackend());
  ASSERT_FALSE(unpaired.ok());
  EXPECT_NE(unpaired.status().message().find("paired_with 'ids'"), std::string::npos) << unpaired.status().message();
  EXPECT_NE(unpaired.status().message().find("EmbeddingBag"), std::string::npos) << unpaired.status().message();

  // paired_with on the ids themselves, with offsets, without ragged, naming dense values.
  for (const char* bad : {"  - name: ids\n    datatype: INT64\n    ragged: true\n    paired_with: weights\n"
                          "  - name: weights\n    datatype: FP32\n    ragged: true\n    paired_with: ids\n",
                          "  - name: ids\n    datatype: INT64\n    ragged: true\n"
                          "  - name: weights\n    datatype: FP32\n    paired_with: ids\n",
                          "  - name: ids\n    datatype: INT64\n    dims: [6]\n"
                          "  - name: weights\n    datatype: FP32\n    ragged: true\n    paired_with: ids\n",
                          "  - name: ids\n    datatype: INT64\n    ragged: true\n"
                          "  - name: weights\n    datatype: FP32\n    ragged: true\n    paired_with: nope\n"}) {
    auto loaded =
        Load(path, std::string("name: tf_weighted\ninputs:\n") + bad + "outputs:\n  - name: pooled\n", &CpuBackend());
    ASSERT_FALSE(loaded.ok()) << bad;
    EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(loaded.status().message().find("paired_with"), std::string::npos) << loaded.status().message();
  }

  // The weights also an output of their own (summed per row): read other than as the bag's.
  s.counted = true;
  Graph g = WeightedGraph(table, s);
  g.values[static_cast<size_t>(g.outputs[0])].name = "pooled";
  const int total = g.AddValue({"weights_total", DType::kF32, {-1}, true});
  g.nodes.push_back(Node{"ReduceSum",
                         "weights_total",
                         {g.FindValue("weights"), g.AddConstant("axis", testing::MakeI64({1}, {1}))},
                         {total},
                         {{"keepdims", int64_t{0}}}});
  g.outputs.push_back(total);
  const std::string both = testing::WriteTempFile("tf_weighted_and_sum.onnx", testing::AsOnnx(g));
  auto read_twice = Load(both, Config(), &CpuBackend());
  ASSERT_FALSE(read_twice.ok());
  EXPECT_NE(read_twice.status().message().find("ReduceSum"), std::string::npos) << read_twice.status().message();
  EXPECT_NE(read_twice.status().message().find("paired_with 'ids'"), std::string::npos)
      << read_twice.status().message();
}

}  // namespace
}  // namespace rankd
