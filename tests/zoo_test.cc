// The zoo models (tiny configs) score every reference request within 1e-5 of PyTorch, through the
// same path as `rankd run`: JSON body -> Model::Infer -> outputs.
#include <gtest/gtest.h>

#include <cstring>

#include "frontend/kserve_json.h"
#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

class ZooTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooTest, MatchesPyTorchWithinOneInAHundredThousand) {
  const std::string name = GetParam();
  auto model = Model::Load(testing::SourcePath("models/zoo/" + name), -1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  testing::ExpectZooScores(**model, name, 1e-5);
}

TEST_P(ZooTest, UnfusedPlansScoreAsPyTorchToo) {
  ModelOptions options;
  options.fusion = false;
  auto model = Model::Load(testing::SourcePath("models/zoo/" + GetParam()), -1, options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->load_report().fused_embedding_bags, 0);
  EXPECT_EQ((*model)->load_report().fused_epilogues, 0);
  EXPECT_EQ((*model)->graph().OpCounts()["EmbeddingBag"], 0);
  testing::ExpectZooScores(**model, GetParam(), 1e-5);
  auto plan = (*model)->PlanForRequest((*model)->ExampleRequest(2));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ((*model)->CountLaunches(**plan).status().code(), StatusCode::kUnimplemented);  // the CPU launches nothing
}

// Lengths summed by the parser (InferInput::offsets) stand in for the model's own pass over them:
// the same scores, and the same refusals of a negative length and of lengths that do not add up.
TEST_P(ZooTest, LengthsSummedByTheParserActAsTheModelsOwnPass) {
  auto model = Model::Load(testing::SourcePath("models/zoo/" + GetParam()), -1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  InferRequest plain = (*model)->ExampleRequest(4, 2);
  bool ragged = false;
  for (InferInput& in : plain.inputs) {
    if (in.lengths.size() < 2 || (*model)->config().FindInput(in.name)->max_length < 4) continue;
    in.lengths[0] += in.lengths[1];  // rows of different lengths, one empty, the same ids
    in.lengths[1] = 0;
    ragged = true;
  }
  if (!ragged) GTEST_SKIP() << GetParam() << " has no ragged input sent with lengths";
  auto summed = [](InferRequest r) {
    for (InferInput& in : r.inputs) {
      if (!in.lengths.empty()) SumLengths(in);
    }
    return r;
  };
  auto want = (*model)->Infer(plain);
  auto got = (*model)->Infer(summed(plain));
  ASSERT_TRUE(want.ok() && got.ok()) << want.status().ToString() << got.status().ToString();
  for (size_t o = 0; o < want->size(); ++o) EXPECT_EQ(testing::RelativeError((*got)[o].data, (*want)[o].data), 0.0);
  for (const char* fault : {"has a row of length -1", "lengths add up to"}) {
    InferRequest bad = plain;
    for (InferInput& in : bad.inputs) {
      if (in.lengths.size() < 2 || in.lengths[1] != 0) continue;  // one changed above
      in.lengths[0] += 1;
      if (fault[2] == 's') in.lengths[1] -= 1;  // the same total, a negative row
      break;
    }
    for (const InferRequest& r : {bad, summed(bad)}) {
      auto refused = (*model)->Infer(r);
      ASSERT_FALSE(refused.ok()) << fault;
      EXPECT_NE(refused.status().message().find(fault), std::string::npos) << refused.status().ToString();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooTest, ::testing::Values("dlrm_dcnv2", "dlrm", "din", "bst", "bst_opset13", "mmoe"));

TEST(ZooTest, DlrmEmbeddingBagsAreRecognisedAndRaggedInputsRewritten) {
  auto model = Model::Load(testing::SourcePath("models/zoo/dlrm_dcnv2"), -1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->load_report().fused_embedding_bags, 26);
  EXPECT_EQ((*model)->load_report().ragged_inputs, 26);
  auto counts = (*model)->graph().OpCounts();
  EXPECT_EQ((*model)->load_report().fused_embedding_concats, 1);
  EXPECT_EQ(counts["EmbeddingBag"], 0);  // all 26 pooled by the one ConcatEmbeddingBags
  EXPECT_EQ(counts["ConcatEmbeddingBags"], 1);
  EXPECT_EQ(counts["Concat"], 0);
  EXPECT_EQ(counts["Gather"], 0);  // every masked gather became a bag
  EXPECT_EQ(counts["ReduceSum"], 0);
  EXPECT_EQ(counts["RaggedToPadded"], 0);  // nothing reads the padded ids any more
}

TEST(ZooTest, PlainModelWithoutConfigGetsDerivedSignature) {
  auto model = Model::Load(testing::SourcePath("models/zoo/mmoe"), -1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& c = (*model)->config();
  EXPECT_TRUE(c.derived);
  ASSERT_EQ(c.inputs.size(), 2u);
  EXPECT_EQ(c.inputs[0].name, "sparse");
  EXPECT_EQ(c.inputs[0].dtype, DType::kI64);
  EXPECT_EQ(c.inputs[0].dims, Shape({20}));
  EXPECT_EQ(c.inputs[1].dims, Shape({10}));
  ASSERT_EQ(c.outputs.size(), 2u);
  EXPECT_EQ(c.outputs[1].name, "cvr");
}

TEST(ZooTest, UserRowsAreSharedByAllCandidates) {
  // One user row with N candidates scores the same as the user row repeated N times.
  auto model = Model::Load(testing::SourcePath("models/zoo/din"), -1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  InferRequest once = (*model)->ExampleRequest(3);
  for (InferInput& in : once.inputs) {
    for (int64_t i = 0; i < in.data.size(); ++i) {
      if (in.data.dtype() == DType::kI64) in.data.data<int64_t>()[i] = (i * 7 + 3) % 50;
    }
  }
  InferRequest repeated = once;
  for (InferInput& in : repeated.inputs) {
    const InputConfig* cfg = (*model)->config().FindInput(in.name);
    if (cfg->scope != InputScope::kUser) continue;
    Shape s = in.data.shape();
    s[0] = 3;
    Tensor t = Tensor::Zeros(in.data.dtype(), s);
    for (int r = 0; r < 3; ++r)
      std::memcpy(static_cast<uint8_t*>(t.raw()) + r * in.data.bytes(), in.data.raw(), in.data.bytes());
    in.data = t;
    if (!in.lengths.empty()) in.lengths.assign(3, in.lengths[0]);
  }
  auto a = (*model)->Infer(once);
  auto b = (*model)->Infer(repeated);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(testing::RelativeError((*a)[0].data, (*b)[0].data), 0.0);
}

}  // namespace
}  // namespace rankd

namespace rankd {
namespace {

// A user with no history: a length-0 sequence scores like PyTorch's fully masked one. Reference
// from the zoo's PyTorch DIN (tiny, seed 0) on the same ids with a sequence of one -1 slot. A
// zero-size intermediate once crashed the CPU backend's broadcast loop here.
TEST(ZooTest, EmptyUserSequenceMatchesPyTorch) {
  auto model = Model::Load(testing::SourcePath("models/zoo/din"), -1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto request = ParseInferRequestJson(R"({"inputs":[
    {"name":"profile","datatype":"INT64","shape":[1,8],"data":[1,2,3,4,5,6,7,8]},
    {"name":"seq_items","datatype":"INT64","shape":[0],"data":[],"parameters":{"lengths":[0]}},
    {"name":"seq_cats","datatype":"INT64","shape":[0],"data":[],"parameters":{"lengths":[0]}},
    {"name":"item","datatype":"INT64","shape":[2],"data":[1,2]},
    {"name":"cat","datatype":"INT64","shape":[2],"data":[1,2]},
    {"name":"context","datatype":"INT64","shape":[2,6],"data":[1,2,3,4,5,6,1,2,3,4,5,6]}]})");
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  auto outputs = (*model)->Infer(*request);
  ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
  const Tensor& score = (*outputs)[0].data;
  ASSERT_EQ(score.size(), 2);
  EXPECT_NEAR(score.data<float>()[0], 0.4892413318157196, 1e-6);
  EXPECT_NEAR(score.data<float>()[1], 0.48421788215637207, 1e-6);
}

}  // namespace
}  // namespace rankd
