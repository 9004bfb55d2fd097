// The KServe v2 JSON request parser against malformed bodies, and the response writer.
#include "frontend/kserve_json.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rankd {
namespace {

Status Parse(const std::string& body) { return ParseInferRequestJson(body).status(); }

TEST(KServeJson, ParsesDenseNestedAndRagged) {
  auto r = ParseInferRequestJson(R"({"id":"q1","inputs":[
      {"name":"a","datatype":"FP32","shape":[2,2],"data":[[1,2],[3,4.5]]},
      {"name":"b","datatype":"INT64","shape":[2,-1],"data":[[7,8,9],[]]},
      {"name":"c","datatype":"INT64","shape":[3],"data":[1,2,3],"parameters":{"lengths":[1,2]}},
      {"name":"d","datatype":"BOOL","shape":[1],"data":[true]}],
      "outputs":[{"name":"score"}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->id, "q1");
  ASSERT_EQ(r->inputs.size(), 4u);
  EXPECT_EQ(r->inputs[0].data.shape(), Shape({2, 2}));
  EXPECT_EQ(r->inputs[0].data.data<float>()[3], 4.5f);
  EXPECT_EQ(r->inputs[1].data.shape(), Shape({3}));
  EXPECT_EQ(r->inputs[1].lengths, std::vector<int64_t>({3, 0}));
  EXPECT_EQ(r->inputs[2].lengths, std::vector<int64_t>({1, 2}));
  EXPECT_EQ(r->inputs[3].data.data<uint8_t>()[0], 1);
  EXPECT_EQ(r->outputs, std::vector<std::string>({"score"}));
}

// The parser sums each ragged input's lengths as it reads them (common/parsed_request.h); inputs
// without lengths have none.
TEST(KServeJson, SumsRaggedLengthsAsItReadsThem) {
  auto r = ParseInferRequest(R"({"inputs":[
      {"name":"a","datatype":"FP32","shape":[2,2],"data":[[1,2],[3,4.5]]},
      {"name":"b","datatype":"INT64","shape":[2,-1],"data":[[7,8,9],[]]},
      {"name":"c","datatype":"INT64","shape":[3],"data":[1,2,3],"parameters":{"lengths":[1,2]}}]})",
                             std::string_view());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->length_sums.size(), 3u);
  EXPECT_FALSE(r->length_sums[0].offsets.defined());
  for (int k : {1, 2}) {
    const LengthSums& s = r->length_sums[static_cast<size_t>(k)];
    ASSERT_EQ(s.offsets.shape(), Shape({3}));
    const int64_t* o = s.offsets.data<int64_t>();
    EXPECT_EQ(std::vector<int64_t>(o, o + 3),
              k == 1 ? std::vector<int64_t>({0, 3, 3}) : std::vector<int64_t>({0, 1, 3}));
    EXPECT_EQ(s.min_length, k == 1 ? 0 : 1);
    EXPECT_EQ(s.max_length, k == 1 ? 3 : 2);
  }
}

// A NAME.lengths tensor's INT32 or INT64 lengths are summed as a parser's, and copied as INT64 in
// the same pass (the copy replacing what the vector held); negative lengths are summed as they
// are, for the model to refuse.
TEST(KServeJson, LengthsTensorsSumAsParsedLengths) {
  const std::vector<int64_t> lengths = {4, 0, -2, 7, 1};
  const LengthSums want = SumLengths(lengths);
  const std::vector<int32_t> narrow(lengths.begin(), lengths.end());
  std::vector<int64_t> copy = {9, 9, 9, 9, 9, 9, 9, 9};
  for (const LengthSums& got :
       {SumLengths(std::span<const int32_t>(narrow), copy), SumLengths(std::span<const int64_t>(lengths), copy)}) {
    EXPECT_EQ(copy, lengths);
    ASSERT_EQ(got.offsets.shape(), Shape({6}));
    EXPECT_EQ(std::vector<int64_t>(got.offsets.data<int64_t>(), got.offsets.data<int64_t>() + 6),
              std::vector<int64_t>({0, 4, 4, 2, 9, 10}));
    EXPECT_EQ(std::vector<int64_t>(want.offsets.data<int64_t>(), want.offsets.data<int64_t>() + 6),
              std::vector<int64_t>({0, 4, 4, 2, 9, 10}));
    EXPECT_EQ(got.min_length, -2);
    EXPECT_EQ(got.max_length, 7);
  }
  const LengthSums none = SumLengths(std::span<const int32_t>(), copy);
  EXPECT_TRUE(copy.empty());
  ASSERT_EQ(none.offsets.shape(), Shape({1}));
  EXPECT_EQ(none.offsets.data<int64_t>()[0], 0);
}

TEST(KServeJson, MalformedBodiesAreRejectedWithAReason) {
  struct Case {
    const char* body;
    const char* fragment;
  };
  const Case cases[] = {
      {"", "empty"},
      {"{", "not valid JSON"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1", "not valid JSON"},
      {"[1,2]", "must be a JSON object"},
      {"{}", "needs an 'inputs' list"},
      {"{\"inputs\":[]}", "is empty"},
      {"{\"inputs\":[7]}", "must be an object"},
      {"{\"inputs\":[{\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}", "needs a string 'name'"},
      {"{\"inputs\":[{\"name\":\"a\",\"shape\":[1],\"data\":[1]}]}", "needs a string 'datatype'"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP99\",\"shape\":[1],\"data\":[1]}]}", "FP99"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP32\",\"data\":[1]}]}", "needs a 'shape' list"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[1]}]}", "has no 'data'"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[1]}]}",
       "shape [2] of FP32 needs 8 bytes (2 values), the request holds 4 bytes (1 value)"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[-5],\"data\":[1]}]}", "non-negative"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[1.5],\"data\":[1]}]}", "non-negative"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[1000000000000],\"data\":[1]}]}", "too large"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[100000,100000,100000],\"data\":[1]}]}",
       "too large"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[],\"data\":[1]}]}", "batch dimension"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[\"x\"]}]}", "not a number"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1e39]}]}", "overflows FP32"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"INT64\",\"shape\":[1],\"data\":[1.5]}]}", "not an integer"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"INT32\",\"shape\":[1],\"data\":[3000000000]}]}", "out of range"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"INT64\",\"shape\":[1],\"data\":[18446744073709551615]}]}",
       "out of range"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"BOOL\",\"shape\":[1],\"data\":[1]}]}", "not a boolean"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"INT64\",\"shape\":[2,-1],\"data\":[1,2]}]}", "one list per row"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"INT64\",\"shape\":[3],\"data\":[1,2,3],\"parameters\":{\"lengths\":"
       "[-1]}}]}",
       "non-negative"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"INT64\",\"shape\":[2],\"data\":[1,2,3],\"parameters\":{\"lengths\":"
       "[3]}}]}",
       "needs 16 bytes (2 values), the request holds 24 bytes (3 values)"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"INT64\",\"shape\":[3],\"data\":[1,2,3],\"parameters\":{\"lengths\":"
       "3}}]}",
       "parameters.lengths must be a list"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"INT64\",\"shape\":[3],\"data\":[1,2,3],\"parameters\":{\"lengths\":"
       "{\"n\":3}}}]}",
       "parameters.lengths must be a list"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"INT64\",\"shape\":[3],\"data\":[1,2,3],\"parameters\":{\"lengths\":"
       "[[1,2]]}}]}",
       "non-negative integers"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"INT64\",\"shape\":[3],\"data\":[1,2,3],\"parameters\":{\"lengths\":"
       "[1.5,1.5]}}]}",
       "non-negative integers"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"INT64\",\"shape\":[3],\"data\":[1,2,3],\"parameters\":{\"lengths\":"
       "[\"3\"]}}]}",
       "non-negative integers"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"INT64\",\"shape\":[3],\"data\":[1,2,3],\"parameters\":{\"lengths\":"
       "[18446744073709551615]}}]}",
       "non-negative integers"},
      {"{\"id\":5,\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}",
       "'id' must be a string"},
      {"{\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}],\"outputs\":[{}]}",
       "needs a string 'name'"},
  };
  for (const Case& c : cases) {
    Status s = Parse(c.body);
    EXPECT_FALSE(s.ok()) << c.body;
    EXPECT_NE(s.message().find(c.fragment), std::string::npos) << c.body << " -> " << s.message();
  }
}

// Lengths arrive as a list in the JSON header of a binary body as well, and each input keeps its own
// (the reader takes them out of the document as it goes).
TEST(KServeJson, LengthsOfBinaryInputsArePerInput) {
  const std::string header =
      "{\"inputs\":[{\"name\":\"a\",\"datatype\":\"INT64\",\"shape\":[3],\"parameters\":{\"binary_data_size\":24,"
      "\"lengths\":[2,0,1]}},{\"name\":\"b\",\"datatype\":\"FP32\",\"shape\":[1],\"parameters\":{\"binary_data_size\":"
      "4}},"
      "{\"name\":\"c\",\"datatype\":\"INT64\",\"shape\":[1],\"parameters\":{\"lengths\":[0,1],"
      "\"binary_data_size\":8}}]}";
  std::string binary(24 + 4 + 8, '\0');
  const int64_t a[3] = {7, 8, 9}, c = 5;
  const float b = 0.5f;
  std::memcpy(binary.data(), a, 24);
  std::memcpy(binary.data() + 24, &b, 4);
  std::memcpy(binary.data() + 28, &c, 8);
  auto parsed = ParseInferRequest(header, binary);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const InferRequest& r = parsed->request;
  ASSERT_EQ(r.inputs.size(), 3u);
  EXPECT_EQ(r.inputs[0].lengths, std::vector<int64_t>({2, 0, 1}));
  EXPECT_TRUE(r.inputs[1].lengths.empty());
  EXPECT_EQ(r.inputs[2].lengths, std::vector<int64_t>({0, 1}));
  EXPECT_EQ(r.inputs[2].data.data<int64_t>()[0], 5);
}

TEST(KServeJson, DeepNestingAndHugeBodiesAreBounded) {
  std::string deep =
      "{\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":" + std::string(100000, '[') +
      std::string(100000, ']') + "}]}";
  Status s = Parse(deep);
  EXPECT_FALSE(s.ok());
  JsonLimits limits;
  limits.max_body_bytes = 100;
  EXPECT_EQ(ParseInferRequestJson(std::string(200, ' '), limits).status().code(), StatusCode::kResourceExhausted);
  limits = JsonLimits{};
  limits.max_elements = 3;
  auto r = ParseInferRequestJson(
      "{\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[4],\"data\":[1,2,3,4]}]}", limits);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
}

// Names a response repeats are quoted without a JSON value made for them; anything else (quotes,
// backslashes, control bytes, UTF-8, bytes that are not UTF-8) as nlohmann's dump quotes it, and
// every quoted string reads back as a JSON string.
TEST(KServeJson, QuotedAsTheJsonLibraryQuotes) {
  auto reference = [](std::string_view t) {
    return nlohmann::json(t).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  EXPECT_EQ(JsonQuoted("dlrm_dcnv2"), "\"dlrm_dcnv2\"");
  EXPECT_EQ(JsonQuoted(""), "\"\"");
  std::mt19937 rng(7);
  const std::string alphabet = std::string("az09_.-/ \"\\\t\n\x01\x7f") + "\xc3\xa9" + "\xff";
  for (int i = 0; i < 2000; ++i) {
    std::string t;
    for (int n = static_cast<int>(rng() % 12); n > 0; --n) t += alphabet[rng() % alphabet.size()];
    ASSERT_EQ(JsonQuoted(t), reference(t)) << i;
    EXPECT_TRUE(nlohmann::json::parse(JsonQuoted(t)).is_string());
  }
}

TEST(KServeJson, ResponseRoundTripsFloatsExactly) {
  std::vector<InferOutput> outs;
  outs.push_back({"score", Tensor::FromVector<float>(DType::kF32, {2, 1}, {0.1f, 1e-30f})});
  outs.push_back({"flag", Tensor::FromVector<uint8_t>(DType::kBool, {1}, {1})});
  std::string body = InferResponseJson("m", 3, "q", outs);
  auto j = nlohmann::json::parse(body);
  EXPECT_EQ(j["model_name"], "m");
  EXPECT_EQ(j["model_version"], "3");
  EXPECT_EQ(j["id"], "q");
  EXPECT_EQ(j["outputs"][0]["shape"], nlohmann::json::array({2, 1}));
  EXPECT_EQ(j["outputs"][0]["data"][0].get<float>(), 0.1f);
  EXPECT_EQ(j["outputs"][0]["data"][1].get<float>(), 1e-30f);
  EXPECT_EQ(j["outputs"][1]["data"][0], true);
  EXPECT_EQ(nlohmann::json::parse(ErrorJson("bad \"x\""))["error"], "bad \"x\"");
}

}  // namespace
}  // namespace rankd
