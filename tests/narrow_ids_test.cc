// Ids held in 32 bits (common/narrow_ids.h, compile/narrowable_ids.h): the clamping, which inputs
// qualify, the parsers holding them so for a model that takes them, and the executors and the
// batch merge taking them beside 64-bit ones. On the device, CudaBackend.IdOutOfRangeFailsThatRunOnly sends ids beyond
// INT32's range.
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
#include "runtime/backends.h"
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

const InferInput* FindInput(const InferRequest& r, const std::string& name) {
  for (const InferInput& in : r.inputs) {
    if (in.name == name) return &in;
  }
  return nullptr;
}

std::unique_ptr<Model> LoadZoo(const std::string& name, const ModelOptions& options = {}) {
  auto model = Model::Load(testing::SourcePath("models/zoo/" + name), -1, options);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return model.ok() ? std::move(*model) : nullptr;
}

TEST(IdsIn32Bits, TheModelTakesBagIdsAloneSo) {
  std::unique_ptr<Model> w1 = LoadZoo("dlrm_dcnv2");
  ASSERT_TRUE(w1);
  for (int f = 0; f < 26; ++f) EXPECT_TRUE(w1->TakesIdsIn32Bits("sparse_" + std::to_string(f))) << f;
  EXPECT_FALSE(w1->TakesIdsIn32Bits("dense"));
  EXPECT_FALSE(w1->TakesIdsIn32Bits("no such input"));
  // W2's behaviour sequence also feeds the attention's gathers: it keeps its 64 bits.
  std::unique_ptr<Model> din = LoadZoo("din");
  ASSERT_TRUE(din);
  EXPECT_TRUE(din->TakesIdsIn32Bits("item"));
  EXPECT_FALSE(din->TakesIdsIn32Bits("seq_items"));
  ModelOptions wide;
  wide.ids_in_32_bits = false;
  std::unique_ptr<Model> off = LoadZoo("dlrm_dcnv2", wide);
  ASSERT_TRUE(off);
  EXPECT_FALSE(off->TakesIdsIn32Bits("sparse_0"));
}

TEST(IdsIn32Bits, ParsersHoldTheIdsSoClampedAndRefuseWhatTheyRefusedBefore) {
  std::unique_ptr<Model> w1 = LoadZoo("dlrm_dcnv2");
  ASSERT_TRUE(w1);
  const std::string body = R"({"inputs":[
    {"name":"dense","datatype":"FP32","shape":[2,13],"data":[1,2,3,4,5,6,7,8,9,10,11,12,13,1,2,3,4,5,6,7,8,9,10,11,12,13]},
    {"name":"sparse_0","datatype":"INT64","shape":[5],"parameters":{"lengths":[3,2]},
     "data":[7,-1,4294967297,-4294967297,9223372036854775807]}]})";
  auto narrow = ParseInferRequestJson(body, {}, w1.get());
  ASSERT_TRUE(narrow.ok()) << narrow.status().ToString();
  const InferInput* ids = FindInput(*narrow, "sparse_0");
  ASSERT_TRUE(ids);
  EXPECT_TRUE(ids->ids_in_32_bits);
  ASSERT_EQ(ids->data.dtype(), DType::kI32);
  const std::vector<int32_t> want = {7, -1, INT32_MAX, INT32_MIN, INT32_MAX};
  EXPECT_EQ(std::vector<int32_t>(ids->data.data<int32_t>(), ids->data.data<int32_t>() + 5), want);
  EXPECT_EQ(ids->lengths, (std::vector<int64_t>{3, 2}));
  EXPECT_FALSE(FindInput(*narrow, "dense")->ids_in_32_bits);
  EXPECT_EQ(FindInput(*narrow, "dense")->data.dtype(), DType::kF32);
  // Without the model, as sent.
  auto wide = ParseInferRequestJson(body);
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(FindInput(*wide, "sparse_0")->data.dtype(), DType::kI64);
  EXPECT_FALSE(FindInput(*wide, "sparse_0")->ids_in_32_bits);
  // What INT64 refuses, refused the same.
  for (const char* bad : {"[7,1.5]", R"([7,"x"])", "[7,9223372036854775808]", "[7,true]"}) {
    const std::string text =
        R"({"inputs":[{"name":"sparse_0","datatype":"INT64","shape":[2],"parameters":{"lengths":[2]},"data":)" +
        std::string(bad) + "}]}";
    EXPECT_EQ(ParseInferRequestJson(text, {}, w1.get()).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  // The binary extension: raw little-endian INT64s, not aligned in the body.
  const std::vector<int64_t> raw = {3, (int64_t{1} << 32) + 5, -2};
  std::string header =
      R"({"inputs":[{"name":"sparse_0","datatype":"INT64","shape":[3],"parameters":{"lengths":[1,2],"binary_data_size":24}}]})";
  std::string binary = "x" + std::string(reinterpret_cast<const char*>(raw.data()), 24);
  auto parsed = ParseInferRequest(header, std::string_view(binary).substr(1), {}, w1.get());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const InferInput& b = parsed->request.inputs[0];
  ASSERT_EQ(b.data.dtype(), DType::kI32);
  EXPECT_TRUE(b.ids_in_32_bits);
  EXPECT_EQ(std::vector<int32_t>(b.data.data<int32_t>(), b.data.data<int32_t>() + 3),
            (std::vector<int32_t>{3, INT32_MAX, -2}));
}

// Scores of every zoo request parsed with the model (ids in 32 bits) and without (as sent).
void ExpectSameScoresEitherWay(const Model& model, const std::string& name) {
  std::ifstream in(testing::SourcePath("tests/data/zoo/" + name + ".requests.jsonl"));
  int count = 0;
  for (std::string line; std::getline(in, line); ++count) {
    auto narrow = ParseInferRequestJson(line, {}, &model);
    auto wide = ParseInferRequestJson(line);
    ASSERT_TRUE(narrow.ok() && wide.ok());
    auto a = model.Infer(*narrow);
    auto b = model.Infer(*wide);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
    ASSERT_EQ(a->size(), b->size());
    for (size_t o = 0; o < a->size(); ++o) {
      ASSERT_EQ((*a)[o].data.bytes(), (*b)[o].data.bytes());
      EXPECT_EQ(std::memcmp((*a)[o].data.raw(), (*b)[o].data.raw(), (*a)[o].data.bytes()), 0)
          << name << " request " << count;
    }
  }
  EXPECT_GE(count, 10);
}

// An id past INT32's range does what it did in 64 bits, never scoring as the id it would wrap to:
// a positive one fails the request, a negative one in a ragged bag is an empty slot.
void ExpectIdsPastInt32Refused(const Model& model, const std::string& name, const std::string& input) {
  std::string line = FirstZooRequest(name);
  auto base = ParseInferRequestJson(line, {}, &model);
  ASSERT_TRUE(base.ok());
  ASSERT_TRUE(FindInput(*base, input) && FindInput(*base, input)->ids_in_32_bits) << input;
  for (int64_t bad : {(int64_t{1} << 32) + 1, -(int64_t{1} << 32) + 1}) {
    nlohmann::json j = nlohmann::json::parse(line);
    for (auto& in : j["inputs"]) {
      if (in["name"] != input) continue;
      nlohmann::json* first = &in["data"];
      while (first->is_array()) first = &(*first)[0];
      *first = bad;
    }
    auto narrow = ParseInferRequestJson(j.dump(), {}, &model);
    auto wide = ParseInferRequestJson(j.dump());
    ASSERT_TRUE(narrow.ok() && wide.ok());
    auto a = model.Infer(*narrow);
    auto b = model.Infer(*wide);
    EXPECT_EQ(a.status().code(), b.status().code()) << name << " " << bad;
    if (bad > 0) {
      EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument) << name << " " << bad;
    }
    if (a.ok() && b.ok()) {  // a negative id in a ragged bag: an empty slot either way
      EXPECT_EQ(std::memcmp(a->front().data.raw(), b->front().data.raw(), a->front().data.bytes()), 0)
          << name << " " << bad;
    }
  }
}

TEST(IdsIn32Bits, ZooScoresTheSameAsWithSixtyFourBitIds) {
  for (const char* name : {"dlrm_dcnv2", "din", "mmoe", "dlrm"}) {
    std::unique_ptr<Model> model = LoadZoo(name);
    ASSERT_TRUE(model);
    ExpectSameScoresEitherWay(*model, name);
  }
  std::unique_ptr<Model> w1 = LoadZoo("dlrm_dcnv2");
  ASSERT_TRUE(w1);
  ExpectIdsPastInt32Refused(*w1, "dlrm_dcnv2", "sparse_3");
}

TEST(IdsIn32Bits, RefusedWhereTheModelTakesSixtyFourBits) {
  std::unique_ptr<Model> din = LoadZoo("din");
  ASSERT_TRUE(din);
  auto request = ParseInferRequestJson(FirstZooRequest("din"), {}, din.get());
  ASSERT_TRUE(request.ok());
  for (InferInput& in : request->inputs) {
    if (in.name != "seq_items") continue;
    Tensor narrow = Tensor::Empty(DType::kI32, in.data.shape());
    for (int64_t k = 0; k < in.data.size(); ++k) narrow.data<int32_t>()[k] = NarrowId(in.data.data<int64_t>()[k]);
    in.data = narrow;
    in.ids_in_32_bits = true;
  }
  auto out = din->Infer(*request);
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("32 bits"), std::string::npos) << out.status().ToString();
}

TEST(IdsIn32Bits, MergedBesideSixtyFourBitRequestsTheyAreWidened) {
  PreparedRequest a, b;
  a.rows = b.rows = 1;
  a.inputs = {testing::MakeI64({3}, {4, -1, 6}), testing::MakeI64({2}, {0, 3})};
  b.inputs = {Tensor::Empty(DType::kI32, {2}), testing::MakeI64({2}, {0, 2})};
  b.inputs[0].data<int32_t>()[0] = 9;
  b.inputs[0].data<int32_t>()[1] = INT32_MAX;
  const std::vector<GraphInputKind> kinds = {{GraphInputKind::kValues, 0}, {GraphInputKind::kOffsets, 0}};
  PreparedRequest m = MergeRequests({&a, &b}, kinds);
  ASSERT_EQ(m.inputs[0].dtype(), DType::kI64);
  EXPECT_EQ(std::vector<int64_t>(m.inputs[0].data<int64_t>(), m.inputs[0].data<int64_t>() + 5),
            (std::vector<int64_t>{4, -1, 6, 9, INT32_MAX}));
  EXPECT_EQ(std::vector<int64_t>(m.inputs[1].data<int64_t>(), m.inputs[1].data<int64_t>() + 3),
            (std::vector<int64_t>{0, 3, 5}));
  PreparedRequest both = MergeRequests({&b, &b}, kinds);  // all in 32 bits: merged so
  EXPECT_EQ(both.inputs[0].dtype(), DType::kI32);
  EXPECT_EQ(both.inputs[0].size(), 4);
}

// A bag whose ids are also compared (so a plan keeps them in 64 bits), given them in 32: the
// executor widens them; given bag ids alone in 32, it reads them so. Either way, the scores of
// 64-bit ids. `backend` runs it.
void ExpectExecutorTakesIdsIn32Bits(const Backend& backend) {
  std::mt19937_64 rng(3);
  GraphBuilder g;
  int table = g.Const("t", testing::RandomF32({10, 4}, rng));
  int bag_ids = g.Input("bag_ids", DType::kI64, {-1, 3});
  int compared = g.Input("compared", DType::kI64, {-1, 3});
  g.Output(g.Op("EmbeddingBag", {table, bag_ids}));
  g.Output(g.Op("EmbeddingBag", {table, compared}));
  g.Output(g.Op("Cast", {g.Op("Equal", {compared, g.Const("m", testing::MakeI64({}, {4}))})}, {{"to", int64_t{1}}}));
  const std::vector<int64_t> a = {1, -1, 9, 0, 0, 2, 7, -1, -1, 3, 4, 5}, c = {4, 4, -1, 8, 1, 0, -1, -1, -1, 2, 3, 4};
  const std::vector<Tensor> wide = {testing::MakeI64({4, 3}, a), testing::MakeI64({4, 3}, c)};
  std::vector<Tensor> narrow;
  for (const Tensor& t : wide) {
    Tensor n = Tensor::Empty(DType::kI32, t.shape());
    for (int64_t k = 0; k < t.size(); ++k) n.data<int32_t>()[k] = static_cast<int32_t>(t.data<int64_t>()[k]);
    narrow.push_back(n);
  }
  std::vector<TensorMeta> metas = {{DType::kI64, {4, 3}, nullptr}, {DType::kI64, {4, 3}, nullptr}};
  PlanOptions options;
  options.backend = &backend;
  auto plan = Plan::Build(g.graph(), metas, options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(NarrowableIdInputs(**plan), (std::vector<bool>{true, false}));
  auto resources = backend.PrepareModel(g.graph(), Precision::kFp32);
  ASSERT_TRUE(resources.ok()) << resources.status().ToString();
  auto executor = NewExecutor(backend, *resources);
  ASSERT_TRUE(executor.ok());
  auto want = (*executor)->Run(**plan, wide);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (int run = 0; run < 2; ++run) {  // 32 bits, then 64 again on the same binding
    auto got = (*executor)->Run(**plan, run == 0 ? narrow : wide);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), want->size());
    for (size_t o = 0; o < got->size(); ++o) {
      ASSERT_EQ((*got)[o].bytes(), (*want)[o].bytes());
      EXPECT_EQ(std::memcmp((*got)[o].raw(), (*want)[o].raw(), (*got)[o].bytes()), 0)
          << backend.name() << " output " << o << " run " << run;
    }
  }
}

TEST(IdsIn32Bits, HostExecutorReadsOrWidensThem) { ExpectExecutorTakesIdsIn32Bits(CpuBackend()); }

TEST(IdsIn32Bits, CudaExecutorReadsOrWidensThem) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  ExpectExecutorTakesIdsIn32Bits(*cuda);
}

TEST(IdsIn32Bits, CudaZooScoresTheSameAsWithSixtyFourBitIds) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  for (int buckets : {0, 1}) {
    ModelOptions options;
    options.backend = cuda;
    options.shape_buckets = buckets;
    for (const char* name : {"dlrm_dcnv2", "mmoe"}) {
      std::unique_ptr<Model> model = LoadZoo(name, options);
      ASSERT_TRUE(model);
      ExpectSameScoresEitherWay(*model, name);
    }
    std::unique_ptr<Model> w1 = LoadZoo("dlrm_dcnv2", options);
    ASSERT_TRUE(w1);
    ExpectIdsPastInt32Refused(*w1, "dlrm_dcnv2", "sparse_20");
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
