// The two JSON request readers (frontend/json_request_reader.h) build the same document, with the
// same errors: simdjson's On-Demand reader, used for bodies up to 8 MB, against the streaming
// nlohmann reader, on the parser's malformed cases and on random requests.
#include "frontend/json_request_reader.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace rankd {
namespace {

void ExpectSameLeaves(const std::vector<JsonLeaves>& a, const std::vector<JsonLeaves>& b, const std::string& body) {
  ASSERT_EQ(a.size(), b.size()) << body;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].kinds, b[i].kinds) << body;
    EXPECT_EQ(a[i].values, b[i].values) << body;
    EXPECT_EQ(a[i].row_lengths, b[i].row_lengths) << body;
    EXPECT_EQ(a[i].strings.bytes, b[i].strings.bytes) << body;
    EXPECT_EQ(a[i].strings.offsets, b[i].strings.offsets) << body;
  }
}

void ExpectSameReading(const std::string& body, JsonReadLimits limits = {}) {
  auto streaming = ReadJsonRequestStreaming(body, limits);
  auto indexed = ReadJsonRequestIndexed(body, limits);
  ASSERT_EQ(streaming.ok(), indexed.ok())
      << body << "\nstreaming: " << streaming.status().ToString() << "\nindexed: " << indexed.status().ToString();
  if (!streaming.ok()) {
    EXPECT_EQ(streaming.status().code(), indexed.status().code()) << body;
    EXPECT_EQ(streaming.status().message(), indexed.status().message()) << body;
    return;
  }
  EXPECT_EQ(streaming->root.Dump(), indexed->root.Dump()) << body;
  ExpectSameLeaves(streaming->data, indexed->data, body);
  ExpectSameLeaves(streaming->lengths, indexed->lengths, body);
  EXPECT_EQ(streaming->lengths_of_input, indexed->lengths_of_input) << body;
}

TEST(JsonRequestReader, BothReadersAgreeOnRequestsAndMistakes) {
  const char* bodies[] = {
      R"({"id":"q1","inputs":[{"name":"a","datatype":"FP32","shape":[2,2],"data":[[1,2],[3,4.5]]},
          {"name":"b","datatype":"INT64","shape":[2,-1],"data":[[7,8,9],[]]},
          {"name":"c","datatype":"INT64","shape":[3],"data":[1,2,3],"parameters":{"lengths":[1,2],"x":"y"}},
          {"name":"d","datatype":"BOOL","shape":[1],"data":[true]}],"outputs":[{"name":"score"}],
          "parameters":{"priority":2,"binary_data_output":true}})",
      R"({"inputs":[{"name":"a","datatype":"INT64","shape":[3],"parameters":{"binary_data_size":24,"lengths":[2,0,1]}}]})",
      R"({"inputs":[{"name":"a","data":[18446744073709551615, 9223372036854775807, -9223372036854775808,
          1e39, -0.0, 1e-320, 123456789012345678901234567890, null, "s", {"k":[1]}, [], [[]]]}]})",
      R"({"inputs":[{"data":5}, {"data":{"a":1}}, {"data":"x"}, 7, [1,2], {"name":3,"data":[1]}]})",
      R"({"inputs":[{"name":"a","parameters":{"lengths":3}},{"name":"b","parameters":{"lengths":{"n":3}}},
          {"name":"c","parameters":{"lengths":[[1,2],[3]]}},{"name":"d","parameters":[1]}]})",
      R"({"inputs":[{"name":"a","data":[1]}],"inputs":[{"name":"b","data":[2,3]}]})",
      R"({"inputs":{"name":"a"}})",
      R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[2,-1],"data":[["a","b\"c","\u00e9\n"],[""]]},
          {"name":"t","data":"one"},{"name":"u","data":["x",1,null,"y",{"k":"v"},"z"]}]})",
      R"({"a":{"b":{"c":[1,[2,[3,{"d":null}]]]}}})",
      R"({"inputs":[{"name":"\u00e9\"q","data":[1]}]})",
      "[1,2]",
      "5",
      "-1.5",
      "18446744073709551615",
      "5 6",
      "true x",
      "nul",
      R"({"inputs":[{"name":"a","datatype":"INT64","shape":[-0],"parameters":{"binary_data_size":-0}}]})",
      "\"s\"",
      "null",
      "{}",
      "",
      "{",
      "{} x",
      "{\"a\":1,}",
      "{\"a\" 1}",
      R"({"inputs":[{"name":"a","data":[1,]}]})",
      R"({"inputs":[{"name":"a","data":[1 2]}]})",
      R"({"inputs":[{"name":"a","data":[tru]}]})",
      R"({"inputs":[{"name":"a","data":[01]}]})",
      R"({"inputs":[{"name":"a","data":[1e400]}]})",
      R"({"inputs":[{"name":"a","data":["\x"]}]})",
      "{\"inputs\":[{\"name\":\"a\",\"data\":[\"\xff\"]}]}",
      "{\"a\":\"\xc3\x28\"}",
      R"({"a":"\ud800"})",
      R"({"a":"\ud83d\ude00\u0000"})",
      R"({"inputs":[{"name":"a","data":[-, 1]}]})",
      R"({"inputs":[{"name":"a","data":[-0, 0, -5, 1.0, 2E3, 1e-7]}]})",
      R"({"inputs":[{"name":"a","data":[999999999999999999, 9999999999999999999, -999999999999999999]}]})",
      R"({"inputs":[{"name":"a","data": [ 1 ,	2
          ,3 ] }]})",
      R"({"inputs":[{"name":"a","data":[1]}]} )",
      R"(  {"inputs":[]})",
      R"({"inputs":[{"name":"a","x":nul}]})",
      R"({"inputs":[{"name":"a","data":[nulll]}]})",
      R"({"a":nuLl,"inputs":[]})",
      R"({"inputs":[{"name":"a","parameters":{"p":n}}]})",
  };
  for (const char* body : bodies) ExpectSameReading(body);
}

TEST(JsonRequestReader, BothReadersApplyTheLimitsAlike) {
  JsonReadLimits limits;
  limits.max_elements = 3;
  limits.max_depth = 2;
  for (const char* body : {R"({"inputs":[{"name":"a","data":[1,2,3,4]}]})", R"({"inputs":[{"data":[1,2,3,4]}]})",
                           R"({"inputs":[{"name":"a","data":[[1],[2]]}]})",
                           R"({"inputs":[{"name":"a","data":[[[1]]]}]})", R"({"inputs":[{"name":"a","data":[[[]]]}]})",
                           R"({"inputs":[{"name":"a","parameters":{"lengths":[1,2,3,4]}}]})"}) {
    ExpectSameReading(body, limits);
  }
  std::string deep_document = "{\"a\":" + std::string(40, '[') + std::string(40, ']') + "}";
  ExpectSameReading(deep_document);
}

// An object inside data is one leaf, read through and skipped, however deep: bounded as the
// document is. A body of 20 KB of brackets there (a fuzzer's find) recursed until the stack ran out
// and took the server with it; 400 KB of them in an object under an input's data, or as data,
// must be refused by both readers, with the same answer.
TEST(JsonRequestReader, BothReadersRefuseObjectsInDataNestedPastTheDocumentsBound) {
  auto nest = [](size_t depth, char open, char close) { return std::string(depth, open) + std::string(depth, close); };
  const std::string deep = nest(200000, '[', ']');
  for (const std::string& body : {
           R"({"inputs":[{"name":"a","datatype":"INT64","shape":[1],"data":{"x":)" + deep + "}}]}",
           R"({"inputs":[{"name":"a","datatype":"INT64","shape":[1],"data":[1,{"x":)" + deep + "}]}]}",
           R"({"inputs":[{"name":"a","data":[[{"x":[{"y":)" + deep + "}]}]]}]}",
       }) {
    auto indexed = ReadJsonRequestIndexed(body, {});
    ASSERT_FALSE(indexed.ok());
    EXPECT_EQ(indexed.status().message(), "the request body nests too deeply");
    ExpectSameReading(body);
  }
  // Within the bound, the object is one leaf as before: the document reads.
  const std::string shallow = R"({"inputs":[{"name":"a","data":[1,{"x":)" + nest(30, '[', ']') + "}]}]}";
  auto read = ReadJsonRequestIndexed(shallow, {});
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->data.size(), 1u);
  EXPECT_EQ(read->data[0].kinds, (std::vector<JsonLeaves::Kind>{JsonLeaves::kInt, JsonLeaves::kOther}));
  ExpectSameReading(shallow);
}

// The document as the request parser reads it: types, a repeated key, what is missing.
TEST(JsonRequestReader, TheDocumentReadsAsTheBodyWrites) {
  const std::string body =
      R"({"id":"q","id":"r","inputs":[{"name":"a","shape":[2,-1,18446744073709551615,1.5e3],"data":[1],)"
      R"("parameters":{"binary_data_size":8,"ok":true,"no":false,"n":null,"s":"t\"u"}},7],"outputs":[]})";
  for (auto read : {ReadJsonRequestStreaming, ReadJsonRequestIndexed}) {
    auto doc = read(body, {});
    ASSERT_TRUE(doc.ok()) << doc.status().ToString();
    JsonValue root = doc->root.root();
    ASSERT_TRUE(root.is_object());
    EXPECT_EQ(root["id"].string(), "r");  // the last of a repeated key
    EXPECT_EQ(root.size(), 4u);
    EXPECT_FALSE(root["absent"].exists());
    EXPECT_FALSE(root["absent"]["deeper"].exists());
    EXPECT_TRUE(root["outputs"].is_array());
    EXPECT_TRUE(root["outputs"].empty());
    JsonValue inputs = root["inputs"];
    ASSERT_EQ(inputs.size(), 2u);
    auto it = inputs.begin();
    JsonValue a = *it;
    ++it;
    EXPECT_TRUE((*it).is_number_unsigned());
    EXPECT_EQ((*it).uint64(), 7u);
    EXPECT_EQ(a["name"].string(), "a");
    EXPECT_EQ(a["data"].uint64(), 0u);  // the index of its leaves
    std::vector<std::string> shape;
    for (JsonValue d : a["shape"]) {
      shape.push_back(d.is_number_unsigned()  ? "u" + std::to_string(d.uint64())
                      : d.is_number_integer() ? "i" + std::to_string(d.int64())
                                              : "f" + std::to_string(d.number()));
    }
    EXPECT_EQ(shape, (std::vector<std::string>{"u2", "i-1", "u18446744073709551615", "f1500.000000"}));
    JsonValue params = a["parameters"];
    EXPECT_EQ(params["binary_data_size"].uint64(), 8u);
    EXPECT_TRUE(params["ok"].is_boolean() && params["ok"].boolean());
    EXPECT_TRUE(params["no"].is_boolean() && !params["no"].boolean());
    EXPECT_TRUE(params["n"].is_null());
    EXPECT_FALSE(params["n"].is_string());
    EXPECT_EQ(params["s"].string(), "t\"u");
    EXPECT_EQ(params["s"].key(), "s");
    EXPECT_EQ(params["binary_data_size"].string(), "");  // not a string: empty
  }
}

// Random requests: nested data of every kind of number, ragged rows, lengths lists, other keys.
TEST(JsonRequestReader, BothReadersAgreeOnRandomRequests) {
  std::mt19937_64 rng(53);
  auto number = [&]() -> std::string {
    switch (rng() % 6) {
      case 0:
        return std::to_string(static_cast<int64_t>(rng()));
      case 1:
        return std::to_string(rng());
      case 2:
        return std::to_string(static_cast<int>(rng() % 100));
      case 3: {
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%.17g", std::uniform_real_distribution<double>(-1e6, 1e6)(rng));
        return buf;
      }
      case 4:
        return rng() % 2 ? "true" : "false";
      default:
        return std::to_string(static_cast<int>(rng() % 7)) + "e" + std::to_string(static_cast<int>(rng() % 30) - 15);
    }
  };
  for (int t = 0; t < 200; ++t) {
    std::string body = "{\"id\":\"r" + std::to_string(t) + "\",\"inputs\":[";
    const int inputs = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < inputs; ++i) {
      body += std::string(i ? "," : "") + "{\"name\":\"in" + std::to_string(i) + "\",\"datatype\":\"INT64\"";
      const int rows = static_cast<int>(rng() % 5);
      std::string data = "[", lengths = "[";
      for (int r = 0; r < rows; ++r) {
        const int n = static_cast<int>(rng() % 4);
        if (rng() % 2) {
          data += std::string(r ? "," : "") + "[";
          for (int k = 0; k < n; ++k) data += std::string(k ? "," : "") + number();
          data += "]";
        } else {
          data += std::string(r ? "," : "") + number();
        }
        lengths += std::string(r ? "," : "") + std::to_string(n);
      }
      body += ",\"data\":" + data + "]";
      if (rng() % 2) body += ",\"parameters\":{\"lengths\":" + lengths + "],\"k\":" + number() + "}";
      body += "}";
    }
    body += "],\"outputs\":[{\"name\":\"score\"}]}";
    ExpectSameReading(body);
  }
}

}  // namespace
}  // namespace rankd
