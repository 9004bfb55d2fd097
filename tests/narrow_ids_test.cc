// Ids narrowed to 32 bits inside the executor (common/narrow_ids.h, compile/narrowable_ids.h): the
// clamping, which inputs qualify, requests keeping their 64 bits, and ids past INT32's range
// treated as in 64 bits. On the device, CudaBackend.IdOutOfRangeFailsThatRunOnly sends ids beyond
// INT32's range too.
#include "common/narrow_ids.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "compile/narrowable_ids.h"
#include "compile/plan.h"
#include "frontend/kserve_json.h"
#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::GraphBuilder;

constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kMin32 = std::numeric_limits<int32_t>::min();

TEST(NarrowIds, ClampsToInt32sRange) {
  const std::vector<int64_t> from = {
      0, -1, 7, kMax32, kMax32 + 1, int64_t{1} << 32, int64_t{1} << 40, kMin32, kMin32 - 1, -(int64_t{1} << 40)};
  const std::vector<int32_t> want = {0,         -1,        7,         INT32_MAX, INT32_MAX,
                                     INT32_MAX, INT32_MAX, INT32_MIN, INT32_MIN, INT32_MIN};
  std::vector<int32_t> to(from.size());
  NarrowIds(from.data(), to.data(), from.size());
  EXPECT_EQ(to, want);
}

TEST(NarrowIds, LongRunsWithRareOutliersMatchTheClamp) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    const size_t n = rng() % 3000;
    std::vector<int64_t> from(n);
    for (int64_t& id : from) {
      id = static_cast<int64_t>(rng() % 1000000) - 1;
      if (rng() % 700 == 0) id = static_cast<int64_t>(rng());  // anywhere in INT64's range
      if (rng() % 900 == 0) id = rng() % 2 ? kMax32 + 1 : kMin32 - 1;
    }
    std::vector<int32_t> to(n), want(n);
    for (size_t i = 0; i < n; ++i) want[i] = static_cast<int32_t>(std::clamp(from[i], kMin32, kMax32));
    NarrowIds(from.data(), to.data(), n);
    ASSERT_EQ(to, want) << "trial " << trial;
  }
}

TEST(NarrowIds, NarrowIdClampsAsTheBlockLoop) {
  for (int64_t id :
       {int64_t{0}, int64_t{-1}, kMax32, kMax32 + 1, kMin32, kMin32 - 1, int64_t{1} << 40, -(int64_t{1} << 40)}) {
    int32_t block;
    NarrowIds(&id, &block, 1);
    EXPECT_EQ(NarrowId(id), block) << id;
  }
}

// A request line of the zoo's W1 (its first), as text.
std::string FirstZooRequest(const std::string& name) {
  std::ifstream in(testing::SourcePath("tests/data/zoo/" + name + ".requests.jsonl"));
  std::string line;
  std::getline(in, line);
  return line;
}

std::unique_ptr<Model> LoadZoo(const std::string& name, const ModelOptions& options = {}) {
  auto model = Model::Load(testing::SourcePath("models/zoo/" + name), -1, options);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return model.ok() ? std::move(*model) : nullptr;
}

TEST(IdsIn32Bits, ParsersKeepTheSixtyFourBitsSent) {
  const std::string body = R"({"inputs":[
    {"name":"sparse_0","datatype":"INT64","shape":[5],"parameters":{"lengths":[3,2]},
     "data":[7,-1,4294967297,-4294967297,9223372036854775807]}]})";
  auto parsed = ParseInferRequestJson(body);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const Tensor& ids = parsed->inputs[0].data;
  ASSERT_EQ(ids.dtype(), DType::kI64);
  const std::vector<int64_t> want = {7, -1, 4294967297, -4294967297, INT64_MAX};
  EXPECT_EQ(std::vector<int64_t>(ids.data<int64_t>(), ids.data<int64_t>() + 5), want);
}

// An id past INT32's range does what it does in 64 bits wherever an executor narrows it, never
// scoring as the id it would wrap to: a positive one fails the request, a negative one in a
// ragged bag is an empty slot (as -1 is).
void ExpectIdsPastInt32AsInSixtyFourBits(const Model& model, const std::string& name, const std::string& input) {
  const std::string line = FirstZooRequest(name);
  auto with = [&](int64_t id) {
    nlohmann::json j = nlohmann::json::parse(line);
    for (auto& in : j["inputs"]) {
      if (in["name"] != input) continue;
      nlohmann::json* first = &in["data"];
      while (first->is_array()) first = &(*first)[0];
      *first = id;
    }
    auto request = ParseInferRequestJson(j.dump());
    EXPECT_TRUE(request.ok()) << request.status().ToString();
    return model.Infer(*request);
  };
  auto positive = with((int64_t{1} << 32) + 1);
  EXPECT_EQ(positive.status().code(), StatusCode::kInvalidArgument) << name;
  auto negative = with(-(int64_t{1} << 32) + 1);
  auto empty = with(-1);
  ASSERT_TRUE(negative.ok() && empty.ok()) << negative.status().ToString() << empty.status().ToString();
  EXPECT_EQ(std::memcmp(negative->front().data.raw(), empty->front().data.raw(), empty->front().data.bytes()), 0)
      << name;
}

TEST(IdsIn32Bits, IdsPastInt32AsInSixtyFourBits) {
  std::unique_ptr<Model> w1 = LoadZoo("dlrm_dcnv2");
  ASSERT_TRUE(w1);
  ExpectIdsPastInt32AsInSixtyFourBits(*w1, "dlrm_dcnv2", "sparse_3");
}

TEST(IdsIn32Bits, CudaIdsPastInt32AsInSixtyFourBits) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  for (int buckets : {0, 1}) {
    ModelOptions options;
    options.backend = cuda;
    options.shape_buckets = buckets;
    std::unique_ptr<Model> w1 = LoadZoo("dlrm_dcnv2", options);
    ASSERT_TRUE(w1);
    ExpectIdsPastInt32AsInSixtyFourBits(*w1, "dlrm_dcnv2", "sparse_20");
  }
}

std::vector<bool> Narrowable(Graph& graph, const std::vector<TensorMeta>& metas) {
  auto plan = Plan::Build(graph, metas);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? NarrowableIdInputs(**plan) : std::vector<bool>();
}

TEST(NarrowIds, OnlyInputsReadSolelyAsBagIds) {
  std::mt19937_64 rng(1);
  GraphBuilder g;
  int table = g.Const("t", testing::RandomF32({10, 4}, rng));
  int ids = g.Input("ids", DType::kI64, {-1});
  int offsets = g.Input("offsets", DType::kI64, {-1});
  int padded = g.Input("padded", DType::kI64, {-1, 3});
  int also_compared = g.Input("compared", DType::kI64, {-1, 3});
  g.Output(g.Op("EmbeddingBag", {table, ids, offsets}));
  g.Output(g.Op("EmbeddingBag", {table, g.Op("Reshape", {padded, g.Const("s", testing::MakeI64({2}, {-1, 3}))})}));
  g.Output(g.Op("EmbeddingBag", {table, also_compared}));
  g.Output(g.Op("Equal", {also_compared, g.Const("m", testing::MakeI64({}, {-1}))}));
  std::vector<TensorMeta> metas{{DType::kI64, {6}, nullptr},
                                {DType::kI64, {3}, nullptr},
                                {DType::kI64, {2, 3}, nullptr},
                                {DType::kI64, {2, 3}, nullptr}};
  // Bag ids (also through a reshape) are narrowed; offsets are not ids; an input also read by
  // an Equal keeps its 64 bits.
  EXPECT_EQ(Narrowable(g.graph(), metas), (std::vector<bool>{true, false, true, false}));
}

TEST(NarrowIds, NotForTablesBeyondInt32Rows) {
  GraphBuilder g;
  // A table's rows only matter through its shape here; the plan never reads its data.
  int table = g.Const("t", Tensor::View(DType::kF32, {kMax32 + 1, 1}, nullptr));
  int ids = g.Input("ids", DType::kI64, {-1, 2});
  g.Output(g.Op("EmbeddingBag", {table, ids}));
  EXPECT_EQ(Narrowable(g.graph(), {{DType::kI64, {4, 2}, nullptr}}), std::vector<bool>{false});
}

TEST(NarrowIds, InputsHandedBackAsOutputsKeepTheirBits) {
  std::mt19937_64 rng(2);
  GraphBuilder g;
  int table = g.Const("t", testing::RandomF32({10, 4}, rng));
  int ids = g.Input("ids", DType::kI64, {-1, 2});
  g.Output(g.Op("EmbeddingBag", {table, ids}));
  g.Output(ids);
  EXPECT_EQ(Narrowable(g.graph(), {{DType::kI64, {4, 2}, nullptr}}), std::vector<bool>{false});
}

TEST(NarrowIds, W1SendsEveryFeaturesIdsNarrowed) {
  auto model = Model::Load(testing::SourcePath("models/zoo/dlrm_dcnv2"), -1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto plan = (*model)->PlanForRequest((*model)->ExampleRequest(16, 2));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::vector<bool> narrowed = NarrowableIdInputs(**plan);
  const Graph& graph = (*plan)->graph();
  int count = 0;
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    if (!narrowed[i]) continue;
    ++count;
    EXPECT_EQ((*plan)->values()[static_cast<size_t>(graph.inputs[i])].dtype, DType::kI64);
  }
  EXPECT_EQ(count, 26);  // the ids of the 26 sparse features; their offsets and the dense input stay
}

}  // namespace
}  // namespace rankd
