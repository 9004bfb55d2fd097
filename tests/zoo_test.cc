// The zoo models (tiny configs) score every reference request within 1e-5 of PyTorch, through the
// same path as `rankd run`: JSON body -> Model::Infer -> outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "common/parsed_request.h"
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

// Ragged rows of different lengths (one empty) sent as flat values with lengths score as the same
// rows sent padded with -1, with their lengths summed by a parser (common/parsed_request.h) or
// not, or sent as tensors of their own; lengths that are negative or do not add up are refused,
// naming why, however sent.
TEST_P(ZooTest, RaggedRowsWithLengthsScoreAsPaddedRows) {
  auto model = Model::Load(testing::SourcePath("models/zoo/" + GetParam()), -1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  InferRequest plain = (*model)->ExampleRequest(4, 2);
  RandomizeFloats(plain, 7);
  bool ragged = false;
  for (InferInput& in : plain.inputs) {
    if (in.lengths.size() < 2 || (*model)->config().FindInput(in.name)->max_length < 4) continue;
    in.lengths[0] += in.lengths[1];  // rows of different lengths, one empty
    in.lengths[1] = 0;
    for (int64_t k = 0; k < in.data.size(); ++k) in.data.data<int64_t>()[k] = k % 3;
    ragged = true;
  }
  if (!ragged) GTEST_SKIP() << GetParam() << " has no ragged input sent with lengths";
  InferRequest padded = plain;
  for (InferInput& in : padded.inputs) {
    if (in.lengths.empty()) continue;
    const int64_t rows = static_cast<int64_t>(in.lengths.size());
    const int64_t width = *std::max_element(in.lengths.begin(), in.lengths.end());
    Tensor t = Tensor::Empty(DType::kI64, {rows, width});
    const int64_t* from = in.data.data<int64_t>();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t k = 0; k < width; ++k) t.data<int64_t>()[r * width + k] = k < in.lengths[r] ? *from++ : -1;
    }
    in.data = t;
    in.lengths.clear();
  }
  auto summed = [](const InferRequest& r) {
    std::vector<LengthSums> sums;
    for (const InferInput& in : r.inputs) sums.push_back(in.lengths.empty() ? LengthSums{} : SumLengths(in.lengths));
    return sums;
  };
  // The lengths as tensors of their own (NAME.lengths, before all the inputs), as stock clients send them.
  auto as_tensors = [](InferRequest r, DType dtype) {
    std::vector<InferInput> inputs;
    for (InferInput& in : r.inputs) {
      if (!in.lengths.empty()) {
        InferInput t;
        t.name = in.name + std::string(kLengthsTensorSuffix);
        t.data = Tensor::Empty(dtype, {static_cast<int64_t>(in.lengths.size())});
        for (size_t k = 0; k < in.lengths.size(); ++k) {
          if (dtype == DType::kI32) t.data.data<int32_t>()[k] = static_cast<int32_t>(in.lengths[k]);
          if (dtype == DType::kI64) t.data.data<int64_t>()[k] = in.lengths[k];
        }
        inputs.insert(inputs.begin(), std::move(t));
        in.lengths.clear();
      }
      inputs.push_back(std::move(in));
    }
    r.inputs = std::move(inputs);
    return r;
  };
  auto want = (*model)->Infer(padded);
  auto got = (*model)->Infer(plain);
  auto got_summed = (*model)->Infer(plain, summed(plain));
  ASSERT_TRUE(want.ok() && got.ok() && got_summed.ok())
      << want.status().ToString() << got.status().ToString() << got_summed.status().ToString();
  for (size_t o = 0; o < want->size(); ++o) {
    EXPECT_LT(testing::RelativeError((*got)[o].data, (*want)[o].data), 1e-6) << GetParam() << " output " << o;
    EXPECT_EQ(testing::RelativeError((*got_summed)[o].data, (*got)[o].data), 0.0) << GetParam() << " output " << o;
  }
  for (DType dtype : {DType::kI32, DType::kI64}) {
    auto got_tensors = (*model)->Infer(as_tensors(plain, dtype));
    ASSERT_TRUE(got_tensors.ok()) << got_tensors.status().ToString();
    for (size_t o = 0; o < want->size(); ++o) {
      EXPECT_EQ(testing::RelativeError((*got_tensors)[o].data, (*got)[o].data), 0.0) << GetParam() << " output " << o;
    }
  }
  for (const char* fault : {"has a row of length -1", "lengths add up to"}) {
    InferRequest bad = plain;
    for (InferInput& in : bad.inputs) {
      if (in.lengths.size() < 2 || in.lengths[1] != 0) continue;  // one changed above
      in.lengths[0] += 1;
      if (fault[2] == 's') in.lengths[1] -= 1;  // the same total, a negative row
      break;
    }
    for (auto refused :
         {(*model)->Infer(bad), (*model)->Infer(bad, summed(bad)), (*model)->Infer(as_tensors(bad, DType::kI32))}) {
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
