// Bad models and bad requests each give a clear error, never a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <tuple>

#include "frontend/kserve_json.h"
#include "model/config.h"
#include "model/onnx_import.h"
#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

namespace fs = std::filesystem;
using testing::OneNodeModel;
using testing::WriteTempFile;

void ExpectError(const Status& s, StatusCode code, const std::string& fragment) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << "'" << s.message() << "' lacks '" << fragment << "'";
}

TEST(ModelErrors, GarbageTruncatedAndEmptyFiles) {
  std::string valid = OneNodeModel("Relu", {"x"}, {"y"});
  ExpectError(ImportOnnxBytes("not a model at all", 18, {}).status(), StatusCode::kInvalidArgument, "protobuf");
  for (size_t cut : {size_t{1}, valid.size() / 2, valid.size() - 1}) {
    auto g = ImportOnnxBytes(valid.data(), cut, {});
    EXPECT_FALSE(g.ok()) << "truncated at " << cut;
  }
  ExpectError(ImportOnnxBytes("", 0, {}).status(), StatusCode::kInvalidArgument, "opset");
  ExpectError(ImportOnnxFile("/nonexistent/model.onnx").status(), StatusCode::kNotFound, "cannot be opened");
}

TEST(ModelErrors, UnsupportedOpNamesTheOpAndNode) {
  auto g = ImportOnnxBytes(OneNodeModel("NonMaxSuppression", {"a", "b"}, {"c"}).data(),
                           OneNodeModel("NonMaxSuppression", {"a", "b"}, {"c"}).size(), {});
  ASSERT_TRUE(g.ok());
  std::string path = WriteTempFile("unsupported/model.onnx", OneNodeModel("NonMaxSuppression", {"a", "b"}, {"c"}));
  auto m = Model::LoadFile(path, {});
  ExpectError(m.status(), StatusCode::kUnimplemented, "NonMaxSuppression 'n0'");
}

// A node short of its inputs is refused before any pass reads it (a fuzzed model's GreaterOrEqual
// with one input once sent the embedding-bag fusion past the end of its inputs).
TEST(ModelErrors, NodeShortOfInputsFailsTheLoad) {
  std::string path = WriteTempFile("short/model.onnx", OneNodeModel("GreaterOrEqual", {"a"}, {"c"}));
  ExpectError(Model::LoadFile(path, {}).status(), StatusCode::kInvalidArgument,
              "GreaterOrEqual 'n0' has 1 inputs; it takes 2");
}

TEST(ModelErrors, UnsupportedAttributeFailsTheLoad) {
  onnx::AttributeProto eq;
  eq.set_name("equation");
  eq.set_type(onnx::AttributeProto::STRING);
  eq.set_s("...ij,...jk->...ik");
  std::string path = WriteTempFile("ellipsis/model.onnx", OneNodeModel("Einsum", {"a", "b"}, {"c"}, 17, {eq}));
  ExpectError(Model::LoadFile(path, {}).status(), StatusCode::kUnimplemented, "ellipsis");

  onnx::AttributeProto to;
  to.set_name("to");
  to.set_type(onnx::AttributeProto::INT);
  to.set_i(8);  // STRING
  path = WriteTempFile("caststring/model.onnx", OneNodeModel("Cast", {"a"}, {"c"}, 17, {to}));
  ExpectError(Model::LoadFile(path, {}).status(), StatusCode::kUnimplemented, "cast to ONNX type 8");
}

TEST(ModelErrors, OpsetOutOfRangeAndForeignDomain) {
  std::string old = OneNodeModel("Relu", {"x"}, {"y"}, 9);
  ExpectError(ImportOnnxBytes(old.data(), old.size(), {}).status(), StatusCode::kUnimplemented, "opset 9");
  std::string newer = OneNodeModel("Relu", {"x"}, {"y"}, 22);
  ExpectError(ImportOnnxBytes(newer.data(), newer.size(), {}).status(), StatusCode::kUnimplemented,
              "opset 22 is not supported (13 to 21)");
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(OneNodeModel("Relu", {"x"}, {"y"})));
  m.mutable_graph()->mutable_node(0)->set_domain("com.microsoft");
  std::string bytes = m.SerializeAsString();
  ExpectError(ImportOnnxBytes(bytes.data(), bytes.size(), {}).status(), StatusCode::kUnimplemented, "com.microsoft");
}

TEST(ModelErrors, DanglingInputAndMissingExternalData) {
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(OneNodeModel("Relu", {"x"}, {"y"})));
  m.mutable_graph()->mutable_node(0)->set_input(0, "nowhere");
  std::string bytes = m.SerializeAsString();
  ExpectError(ImportOnnxBytes(bytes.data(), bytes.size(), {}).status(), StatusCode::kInvalidArgument, "nowhere");

  ASSERT_TRUE(m.ParseFromString(OneNodeModel("Add", {"x", "w"}, {"y"})));
  auto* init = m.mutable_graph()->add_initializer();
  init->set_name("w");
  init->set_data_type(1);
  init->add_dims(4);
  init->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = init->add_external_data();
  kv->set_key("location");
  kv->set_value("weights.bin");
  std::string path = WriteTempFile("external/model.onnx", m.SerializeAsString());
  ExpectError(ImportOnnxFile(path).status(), StatusCode::kNotFound, "weights.bin");
  // Present but too short.
  std::ofstream(fs::path(path).parent_path() / "weights.bin") << "abc";
  ExpectError(ImportOnnxFile(path).status(), StatusCode::kInvalidArgument, "past the end");
  // Escaping the model directory is refused.
  kv->set_value("../../etc/passwd");
  path = WriteTempFile("external2/model.onnx", m.SerializeAsString());
  ExpectError(ImportOnnxFile(path).status(), StatusCode::kInvalidArgument, "inside the model directory");
  // A correct file loads, and the weights are read from it.
  kv->set_value("weights.bin");
  path = WriteTempFile("external3/model.onnx", m.SerializeAsString());
  float w[4] = {1, 2, 3, 4};
  std::ofstream(fs::path(path).parent_path() / "weights.bin", std::ios::binary)
      .write(reinterpret_cast<char*>(w), sizeof w);
  auto g = ImportOnnxFile(path);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->constants.at(g->FindValue("w")).data<float>()[3], 4.0f);
}

TEST(ModelErrors, IntegerArithmeticWrapsInsteadOfOverflowing) {
  // Found by fuzz_model_loader in CI's run: a folded Mul of INT64 constants overflowed (undefined),
  // and INT64_MIN / -1 traps on x86. Both wrap now, as ONNX Runtime's integer kernels do.
  const int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  for (const auto& [op, b, want] : {std::tuple{"Mul", int64_t{2}, int64_t{-2}}, std::tuple{"Add", int64_t{1}, kMin},
                                    std::tuple{"Sub", int64_t{-1}, kMin}, std::tuple{"Div", int64_t{-1}, kMin + 1}}) {
    testing::GraphBuilder g;
    int x = g.Input("x", DType::kI64, {2});
    int y = g.Input("y", DType::kI64, {2});
    g.Output(g.Op(op, {x, y}));
    auto out = testing::RunGraph(g.graph(), {testing::MakeI64({2}, {kMax, kMin}), testing::MakeI64({2}, {b, b})});
    ASSERT_TRUE(out.ok()) << op << ": " << out.status().ToString();
    EXPECT_EQ((*out)[0].data<int64_t>()[0], want) << op;
  }
  testing::GraphBuilder g;
  int x = g.Input("x", DType::kI64, {1});
  int y = g.Input("y", DType::kI64, {1});
  g.Output(g.Op("Div", {x, y}));
  auto out = testing::RunGraph(g.graph(), {testing::MakeI64({1}, {kMin}), testing::MakeI64({1}, {-1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->at(0).data<int64_t>()[0], kMin);
}

// ONNX's Mod: the remainder takes the divisor's sign (fmod 0) or the dividend's (fmod 1); by 0 and
// by -1 it is 0 (INT64_MIN % -1 would trap); floating-point inputs without fmod 1 are refused.
TEST(ModelErrors, ModTakesTheSignsOnnxSaysAndNeverTraps) {
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  for (int64_t fmod : {0, 1}) {
    testing::GraphBuilder g;
    int x = g.Input("x", DType::kI64, {6});
    int y = g.Input("y", DType::kI64, {6});
    g.Output(g.Op("Mod", {x, y}, {{"fmod", fmod}}));
    auto out = testing::RunGraph(
        g.graph(), {testing::MakeI64({6}, {-7, 7, -7, 7, kMin, 5}), testing::MakeI64({6}, {3, -3, -3, 3, -1, 0})});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const std::vector<int64_t> got((*out)[0].data<int64_t>(), (*out)[0].data<int64_t>() + 6);
    EXPECT_EQ(got, fmod == 0 ? std::vector<int64_t>({2, -2, -1, 1, 0, 0}) : std::vector<int64_t>({-1, 1, -1, 1, 0, 0}));
  }
  testing::GraphBuilder g;
  int x = g.Input("x", DType::kF32, {2});
  g.Output(g.Op("Mod", {x, x}));
  auto refused = testing::RunGraph(g.graph(), {testing::MakeF32({2}, {1, 2})});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("fmod = 1"), std::string::npos) << refused.status().ToString();
}

TEST(ModelErrors, SliceWithAHugeStepTakesOneElement) {
  // Found by fuzz_model_loader in CI's run: a step of ~1e18 overflowed the slice's stride.
  testing::GraphBuilder g;
  int x = g.Input("x", DType::kI64, {16});
  int starts = g.Const("starts", testing::MakeI64({1}, {3}));
  int ends = g.Const("ends", testing::MakeI64({1}, {16}));
  int axes = g.Const("axes", testing::MakeI64({1}, {0}));
  int steps = g.Const("steps", testing::MakeI64({1}, {936748722493063169}));
  g.Output(g.Op("Slice", {x, starts, ends, axes, steps}));
  std::vector<int64_t> values(16);
  for (int i = 0; i < 16; ++i) values[static_cast<size_t>(i)] = 100 + i;
  auto out = testing::RunGraph(g.graph(), {testing::MakeI64({16}, values)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->at(0).shape(), Shape({1}));
  EXPECT_EQ(out->at(0).data<int64_t>()[0], 103);
  // The most negative step, backwards from the end: one element too.
  testing::GraphBuilder back;
  int y = back.Input("x", DType::kI64, {16});
  int s2 = back.Const("starts", testing::MakeI64({1}, {-1}));
  int e2 = back.Const("ends", testing::MakeI64({1}, {std::numeric_limits<int64_t>::min()}));
  int a2 = back.Const("axes", testing::MakeI64({1}, {0}));
  int st2 = back.Const("steps", testing::MakeI64({1}, {std::numeric_limits<int64_t>::min()}));
  back.Output(back.Op("Slice", {y, s2, e2, a2, st2}));
  out = testing::RunGraph(back.graph(), {testing::MakeI64({16}, values)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->at(0).shape(), Shape({1}));
  EXPECT_EQ(out->at(0).data<int64_t>()[0], 115);
}

TEST(ModelErrors, MissingModelDirectoryAndVersion) {
  ExpectError(Model::Load("/nonexistent/model", -1).status(), StatusCode::kNotFound, "does not exist");
  ExpectError(Model::Load(testing::SourcePath("models/zoo/din"), 7).status(), StatusCode::kNotFound, "no version 7");
}

TEST(ModelErrors, ConfigErrorsNameTheField) {
  ExpectError(ParseModelConfig("{\"inputz\": []}", false).status(), StatusCode::kInvalidArgument, "inputz");
  ExpectError(ParseModelConfig("inputs:\n  - name: a\n    datatype: FP99\n", true).status(),
              StatusCode::kInvalidArgument, "FP99");
  ExpectError(ParseModelConfig("inputs: [", true).status(), StatusCode::kInvalidArgument, "YAML");
  // A value of the wrong type is an error, not an exception through the repository's poll thread.
  ExpectError(ParseModelConfig("version_policy:\n  latest: {num_versions: many}\n", true).status(),
              StatusCode::kInvalidArgument, "config");
  ExpectError(ParseModelConfig("inputs:\n  - name: a\n    scope: everyone\n", true).status(),
              StatusCode::kInvalidArgument, "scope");
  auto ok = ParseModelConfig("inputs:\n  - name: a\n    ragged: true\n    max_length: 5\n    scope: user\n", true);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(ok->inputs[0].ragged);
  EXPECT_EQ(ok->inputs[0].max_length, 5);
  EXPECT_EQ(ok->inputs[0].scope, InputScope::kUser);
  ExpectError(ParseModelConfig("precision: fp16\n", true).status(), StatusCode::kInvalidArgument, "precision");
  auto tf32 = ParseModelConfig("precision: tf32\n", true);
  ASSERT_TRUE(tf32.ok()) << tf32.status().ToString();
  EXPECT_EQ(tf32->precision, "tf32");
  auto act = ParseModelConfig("precision: bf16-activations\n", true);
  ASSERT_TRUE(act.ok()) << act.status().ToString();
  EXPECT_EQ(act->precision, "bf16-activations");
  ExpectError(ParseModelConfig("precision: bf16-everything\n", true).status(), StatusCode::kInvalidArgument,
              "bf16-activations");
  // The CPU takes bf16-activations as bf16 products (or fp32 without them): the model loads and scores there.
  ModelOptions options;
  options.precision = "bf16-activations";
  auto cpu = Model::Load(testing::SourcePath("models/zoo/din"), -1, options);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_TRUE((*cpu)->Infer((*cpu)->ExampleRequest(2)).ok());
  options.precision = "bf17";
  ExpectError(Model::Load(testing::SourcePath("models/zoo/din"), -1, options).status(), StatusCode::kInvalidArgument,
              "bf16-activations");
}

// YAML's aliases make a vast tree of a small file (nine anchors of ten aliases: 10^9 values in 300
// bytes, which once held a load until memory ran out) or a deep one; both refused at once, while a
// config that uses an alias as configs do still reads.
TEST(ModelErrors, YamlAliasesExpandingPastTheBoundsAreRefused) {
  std::string laughs = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 9; ++i) {
    laughs += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) laughs += (k ? ", *a" : "*a") + std::to_string(i - 1);
    laughs += "]\n";
  }
  ExpectError(ParseModelConfig(laughs, true).status(), StatusCode::kInvalidArgument, "100000 values");
  std::string chain = "c0: &c0 [1]\n";
  for (int i = 1; i <= 100; ++i)
    chain += "c" + std::to_string(i) + ": &c" + std::to_string(i) + " [*c" + std::to_string(i - 1) + "]\n";
  ExpectError(ParseModelConfig(chain, true).status(), StatusCode::kInvalidArgument, "nests more than 64 deep");
  auto aliased = ParseModelConfig(
      "inputs:\n  - {name: a, ragged: true, max_length: &most 5}\n  - {name: b, ragged: true, max_length: *most}\n",
      true);
  ASSERT_TRUE(aliased.ok()) << aliased.status().ToString();
  ASSERT_EQ(aliased->inputs.size(), 2u);
  EXPECT_EQ(aliased->inputs[1].max_length, 5);
}

class RequestErrors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = Model::Load(testing::SourcePath("models/zoo/din"), -1);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    din_ = m->release();
  }
  static void TearDownTestSuite() { delete din_; }

  // A valid DIN request body with one field replaced.
  static Status Score(const std::string& profile, const std::string& seq, const std::string& item) {
    std::string body =
        "{\"inputs\":[" + profile + "," + seq +
        ",{\"name\":\"seq_cats\",\"datatype\":\"INT64\",\"shape\":[1,-1],\"data\":[[1,2,3]]}," + item +
        ",{\"name\":\"cat\",\"datatype\":\"INT64\",\"shape\":[2],\"data\":[1,2]}"
        ",{\"name\":\"context\",\"datatype\":\"INT64\",\"shape\":[2,6],\"data\":[1,2,3,4,5,6,1,2,3,4,5,6]}]}";
    auto request = ParseInferRequestJson(body);
    if (!request.ok()) return request.status();
    return din_->Infer(*request).status();
  }
  static inline const std::string kProfile =
      "{\"name\":\"profile\",\"datatype\":\"INT64\",\"shape\":[1,8],\"data\":[1,2,3,4,5,6,7,8]}";
  static inline const std::string kSeq =
      "{\"name\":\"seq_items\",\"datatype\":\"INT64\",\"shape\":[1,-1],\"data\":[[5,6,7]]}";
  static inline const std::string kItem = "{\"name\":\"item\",\"datatype\":\"INT64\",\"shape\":[2],\"data\":[9,10]}";
  static Model* din_;
};
Model* RequestErrors::din_ = nullptr;

TEST_F(RequestErrors, ValidRequestScores) { EXPECT_TRUE(Score(kProfile, kSeq, kItem).ok()); }

TEST_F(RequestErrors, WrongDtype) {
  ExpectError(
      Score("{\"name\":\"profile\",\"datatype\":\"FP32\",\"shape\":[1,8],\"data\":[1,2,3,4,5,6,7,8]}", kSeq, kItem),
      StatusCode::kInvalidArgument, "'profile' must be INT64, got FP32");
}

TEST_F(RequestErrors, WrongShapes) {
  ExpectError(
      Score("{\"name\":\"profile\",\"datatype\":\"INT64\",\"shape\":[1,7],\"data\":[1,2,3,4,5,6,7]}", kSeq, kItem),
      StatusCode::kInvalidArgument, "'profile' must have shape [rows, 8]");
  ExpectError(Score(kProfile, kSeq, "{\"name\":\"item\",\"datatype\":\"INT64\",\"shape\":[3],\"data\":[9,10,11]}"),
              StatusCode::kInvalidArgument, "rows; other inputs have");
  ExpectError(Score("{\"name\":\"profile\",\"datatype\":\"INT64\",\"shape\":[3,8],\"data\":[" + std::string(47, ' ') +
                        "1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]}",
                    kSeq, kItem),
              StatusCode::kInvalidArgument, "user input 'profile' must have 1 row");
}

TEST_F(RequestErrors, IdsOutOfRange) {
  ExpectError(Score(kProfile, kSeq, "{\"name\":\"item\",\"datatype\":\"INT64\",\"shape\":[2],\"data\":[9,1000000]}"),
              StatusCode::kInvalidArgument, "out of range");
  ExpectError(
      Score(kProfile, "{\"name\":\"seq_items\",\"datatype\":\"INT64\",\"shape\":[1,-1],\"data\":[[5,6,99999999]]}",
            kItem),
      StatusCode::kInvalidArgument, "out of range");
}

TEST_F(RequestErrors, RaggedLimitsAndMismatches) {
  std::string too_long = "{\"name\":\"seq_items\",\"datatype\":\"INT64\",\"shape\":[1,-1],\"data\":[[";
  for (int i = 0; i < 21; ++i) too_long += (i ? "," : "") + std::to_string(i);
  too_long += "]]}";
  ExpectError(Score(kProfile, too_long, kItem), StatusCode::kInvalidArgument, "length 21 (allowed 0 to 20)");
  ExpectError(Score(kProfile,
                    "{\"name\":\"seq_items\",\"datatype\":\"INT64\",\"shape\":[3],\"data\":[1,2,3],\"parameters\":{"
                    "\"lengths\":[2]}}",
                    kItem),
              StatusCode::kInvalidArgument, "lengths add up to 2");
}

// A ragged input's lengths as a tensor of their own (NAME.lengths, INT32 or INT64, in any place
// among the inputs), as clients without per-input parameters send them; each misuse refused,
// naming the inputs (zoo_test.cc checks that the scores are those of the lengths parameter).
TEST_F(RequestErrors, LengthsAsATensor) {
  const std::string values = "{\"name\":\"seq_items\",\"datatype\":\"INT64\",\"shape\":[3],\"data\":[5,6,7]}";
  auto lengths = [](const std::string& dtype, const std::string& shape, const std::string& data,
                    const std::string& name = "seq_items") {
    return "{\"name\":\"" + name + ".lengths\",\"datatype\":\"" + dtype + "\",\"shape\":" + shape +
           ",\"data\":" + data + "}";
  };
  const std::string int32 = lengths("INT32", "[1]", "[3]");
  EXPECT_EQ(Score(kProfile, values + "," + int32, kItem).ToString(), "OK");
  EXPECT_EQ(Score(kProfile, lengths("INT64", "[1]", "[3]") + "," + values, kItem).ToString(), "OK");
  const std::string with_parameter =
      "{\"name\":\"seq_items\",\"datatype\":\"INT64\",\"shape\":[3],\"data\":[5,6,7],\"parameters\":{"
      "\"lengths\":[3]}}";
  for (const std::string& seq : {with_parameter, kSeq}) {
    ExpectError(Score(kProfile, seq + "," + int32, kItem), StatusCode::kInvalidArgument,
                "ragged input 'seq_items' already has lengths (a parameter or nested rows): send 'seq_items.lengths' "
                "only with flat values");
  }
  ExpectError(Score(kProfile, values + "," + lengths("FP32", "[1]", "[3]"), kItem), StatusCode::kInvalidArgument,
              "input 'seq_items.lengths' must be INT32 or INT64, got FP32");
  ExpectError(Score(kProfile, values + "," + lengths("INT32", "[1,1]", "[[3]]"), kItem), StatusCode::kInvalidArgument,
              "input 'seq_items.lengths' must have shape [rows] (one length a row), got [1, 1]");
  ExpectError(Score(kProfile, values + "," + lengths("INT32", "[1]", "[2]"), kItem), StatusCode::kInvalidArgument,
              "ragged input 'seq_items': lengths add up to 2 but 3 values were sent");
  ExpectError(Score(kProfile, values + "," + lengths("INT32", "[1]", "[-1]"), kItem), StatusCode::kInvalidArgument,
              "ragged input 'seq_items' has a row of length -1");
  ExpectError(Score(kProfile, values + "," + int32 + "," + int32, kItem), StatusCode::kInvalidArgument,
              "input 'seq_items.lengths' is given twice");
  ExpectError(
      Score(kProfile, "{\"name\":\"seq_items\",\"datatype\":\"INT64\",\"shape\":[1,3],\"data\":[[5,6,7]]}," + int32,
            kItem),
      StatusCode::kInvalidArgument, "ragged input 'seq_items' with lengths must be flat values");
  ExpectError(Score(kProfile, values + "," + int32 + "," + lengths("INT32", "[2]", "[1,1]", "item"), kItem),
              StatusCode::kInvalidArgument, "input 'item' is not ragged: send it without 'item.lengths'");
  ExpectError(Score(kProfile, values + "," + int32 + "," + lengths("INT32", "[1]", "[1]", "bogus"), kItem),
              StatusCode::kInvalidArgument, "unknown input 'bogus.lengths'");
  // The lengths without their values: the values are missing.
  auto request = ParseInferRequestJson(
      "{\"inputs\":[" + kProfile + "," + int32 +
      ",{\"name\":\"seq_cats\",\"datatype\":\"INT64\",\"shape\":[1,-1],\"data\":[[1,2,3]]}," + kItem +
      ",{\"name\":\"cat\",\"datatype\":\"INT64\",\"shape\":[2],\"data\":[1,2]}"
      ",{\"name\":\"context\",\"datatype\":\"INT64\",\"shape\":[2,6],\"data\":[1,2,3,4,5,6,1,2,3,4,5,6]}]}");
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  ExpectError(din_->Infer(*request).status(), StatusCode::kInvalidArgument, "input 'seq_items' is missing");
}

TEST_F(RequestErrors, EmptyUnknownAndMissing) {
  ExpectError(Score(kProfile, kSeq, "{\"name\":\"item\",\"datatype\":\"INT64\",\"shape\":[0],\"data\":[]}"),
              StatusCode::kInvalidArgument, "rows");
  ExpectError(Score(kProfile, kSeq, "{\"name\":\"itemz\",\"datatype\":\"INT64\",\"shape\":[2],\"data\":[9,10]}"),
              StatusCode::kInvalidArgument, "unknown input 'itemz'");
  InferRequest r = din_->ExampleRequest(2);
  r.inputs.pop_back();
  ExpectError(din_->Infer(r).status(), StatusCode::kInvalidArgument, "'context' is missing");
  r = din_->ExampleRequest(2);
  r.outputs = {"nope"};
  ExpectError(din_->Infer(r).status(), StatusCode::kInvalidArgument, "unknown output 'nope'");
}

// Inputs are matched by name, in whatever order they come (the config's order is only tried
// first): reversed or rotated, a request scores exactly as in the config's order; a name given
// twice is refused.
TEST_F(RequestErrors, InputsInAnyOrderScoreAlikeAndOneGivenTwiceIsRefused) {
  InferRequest r = din_->ExampleRequest(3, 4);
  int64_t next = 0;
  for (InferInput& in : r.inputs) {  // distinct small ids per input, so a mix-up changes the scores
    ASSERT_EQ(in.data.dtype(), DType::kI64) << in.name;
    for (int64_t i = 0; i < in.data.size(); ++i) in.data.data<int64_t>()[i] = 1 + (next++ % 7);
  }
  auto in_order = din_->Infer(r);
  ASSERT_TRUE(in_order.ok()) << in_order.status().ToString();
  InferRequest reversed = r, rotated = r;
  std::reverse(reversed.inputs.begin(), reversed.inputs.end());
  std::rotate(rotated.inputs.begin(), rotated.inputs.begin() + 1, rotated.inputs.end());
  for (const InferRequest* other : {&reversed, &rotated}) {
    auto scores = din_->Infer(*other);
    ASSERT_TRUE(scores.ok()) << scores.status().ToString();
    ASSERT_EQ(scores->size(), in_order->size());
    for (size_t o = 0; o < scores->size(); ++o) {
      const Tensor& a = (*in_order)[o].data;
      const Tensor& b = (*scores)[o].data;
      ASSERT_EQ(a.shape(), b.shape());
      for (int64_t i = 0; i < a.size(); ++i) EXPECT_EQ(a.data<float>()[i], b.data<float>()[i]) << o << ", " << i;
    }
  }
  InferRequest twice = r;
  twice.inputs.push_back(r.inputs[1]);
  ExpectError(din_->Infer(twice).status(), StatusCode::kInvalidArgument, "'" + r.inputs[1].name + "' is given twice");
}

// NaN and both infinities are refused wherever they sit (the check runs over whole vectors: first,
// middle and last elements, in small and large inputs), naming the first; the extremes of finite
// floats pass.
TEST_F(RequestErrors, NaNIsRefused) {
  auto mmoe = Model::Load(testing::SourcePath("models/zoo/mmoe"), -1);
  ASSERT_TRUE(mmoe.ok());
  InferRequest r = (*mmoe)->ExampleRequest(7);
  ASSERT_EQ(r.inputs[1].data.dtype(), DType::kF32);
  const int64_t last = r.inputs[1].data.size() - 1;
  ASSERT_GT(last, 16);
  const float inf = std::numeric_limits<float>::infinity();
  for (auto [at, bad] : {std::pair{int64_t{3}, std::nanf("")}, std::pair{last, inf}, std::pair{int64_t{0}, -inf},
                         std::pair{last - 1, -std::nanf("")}}) {
    InferRequest with = r;
    with.inputs[1].data = Tensor::Zeros(DType::kF32, r.inputs[1].data.shape());
    with.inputs[1].data.data<float>()[at] = bad;
    ExpectError((*mmoe)->Infer(with).status(), StatusCode::kInvalidArgument,
                "NaN or infinite value at element " + std::to_string(at));
  }
  // A large input: a bad value anywhere is found, and the first one is named.
  InferRequest large = (*mmoe)->ExampleRequest(30000);
  ASSERT_GT(large.inputs[1].data.size(), int64_t{4} << 16);
  const int64_t end = large.inputs[1].data.size();
  for (int64_t at : {end - 1, end / 2 + 3, int64_t{70000}}) {
    InferRequest with = large;
    with.inputs[1].data = Tensor::Zeros(DType::kF32, large.inputs[1].data.shape());
    with.inputs[1].data.data<float>()[at] = at % 2 ? inf : std::nanf("");
    if (at != end - 1) with.inputs[1].data.data<float>()[end - 1] = std::nanf("");  // a later one too
    ExpectError((*mmoe)->Infer(with).status(), StatusCode::kInvalidArgument, "at element " + std::to_string(at));
  }
  InferRequest extremes = r;
  extremes.inputs[1].data = Tensor::Zeros(DType::kF32, r.inputs[1].data.shape());
  float* x = extremes.inputs[1].data.data<float>();
  x[0] = std::numeric_limits<float>::max(), x[1] = -std::numeric_limits<float>::max();
  x[2] = std::numeric_limits<float>::denorm_min(), x[last] = std::numeric_limits<float>::lowest();
  EXPECT_TRUE((*mmoe)->Infer(extremes).ok());
}

TEST_F(RequestErrors, TooManyRows) {
  ModelOptions options;
  options.max_rows = 4;
  auto mmoe = Model::Load(testing::SourcePath("models/zoo/mmoe"), -1, options);
  ASSERT_TRUE(mmoe.ok());
  ExpectError((*mmoe)->Infer((*mmoe)->ExampleRequest(5)).status(), StatusCode::kResourceExhausted, "limit is 4");
  EXPECT_TRUE((*mmoe)->Infer((*mmoe)->ExampleRequest(4)).ok());
}

}  // namespace
}  // namespace rankd
