// Triton's config.pbtxt read as rankd's config: the fields rankd uses, the ones it does not named,
// malformed files refused, and the model configuration API's own answer loading back.
#include "model/triton_text_config.h"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "frontend/triton_config.h"
#include "model/config.h"
#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

namespace fs = std::filesystem;

// The unused entries joined, for matching.
std::string Joined(const std::vector<std::string>& unused) {
  std::string s;
  for (const std::string& u : unused) s += u + "\n";
  return s;
}

constexpr const char* kTritonConfig = R"pb(
  name: "din"
  platform: "onnxruntime_onnx"
  max_batch_size: 512 input
  [ {
    name: "profile"
    data_type: TYPE_INT64
    dims: [ 8 ]
  }
    , {
      name: "seq_items"
      data_type: TYPE_INT64
      dims: [ -1 ]
      allow_ragged_batch: true
    }
    , {
      name: "seq_cats"
      data_type: TYPE_INT64
      dims: [ -1 ]
      allow_ragged_batch: true
    }
    , {
      name: "item"
      data_type: TYPE_INT64
      dims: []
    }
    , {
      name: "cat"
      data_type: TYPE_INT64
      dims: []
    }
    , {
      name: "context"
      data_type: TYPE_INT64
      dims: [ 6 ]
    }] output
  [ {
    name: "score"
    data_type: TYPE_FP32
    dims: [ 1 ]
  }]
  version_policy: { latest: { num_versions: 2 } }
  dynamic_batching {
    preferred_batch_size: [ 64, 256 ]
    max_queue_delay_microseconds: 200
    default_queue_policy { max_queue_size: 100 default_timeout_microseconds: 5000 allow_timeout_override: true }
  } instance_group
  [ {
    count: 2
    kind: KIND_GPU
    rate_limiter { resources
                   [ { name: "r" count: 1 }] }
  }]
  optimization {
    cuda { graphs: false }
    execution_accelerators {
      gpu_execution_accelerator:
      [ {
        name: "tensorrt"
        parameters { key: "precision_mode" value: "FP16" }
      }]
    }
  } model_warmup
  [ {
    name: "w"
    batch_size: 1
    inputs {
      key: "item"
      value: {
        data_type: TYPE_INT64
        dims: [ 1 ]
        zero_data: true
      }
    }
  }]
  response_cache { enable: true }
  parameters {
    key: "precision"
    value: { string_value: "bf16" }
  }
  parameters {
    key: "input.profile.scope"
    value: { string_value: "user" }
  }
  parameters {
    key: "input.seq_items.scope"
    value: { string_value: "user" }
  }
  parameters {
    key: "input.seq_items.max_length"
    value: { string_value: "20" }
  }
  parameters {
    key: "input.seq_cats.scope"
    value: { string_value: "user" }
  }
  parameters {
    key: "input.seq_cats.max_length"
    value: { string_value: "20" }
  }
  parameters {
    key: "batching.max_batch_size"
    value: { string_value: "1024" }
  }
  parameters {
    key: "tables.tiers.item.weight"
    value: { string_value: "disk" }
  }
  parameters {
    key: "tables.disk_dir"
    value: { string_value: "rows" }
  }
  parameters {
    key: "tables.disk_cache_mb"
    value: { string_value: "512" }
  }
  parameters {
    key: "tables.host_budget_mb"
    value: { string_value: "4096" }
  }
  parameters {
    key: "something_else"
    value: { string_value: "x" }
  }
)pb";

TEST(TritonTextConfig, MapsWhatRankdUsesAndNamesTheRest) {
  std::vector<std::string> unused;
  auto j = TritonTextConfigToJson(kTritonConfig, unused);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["max_batch_size"], 512);
  EXPECT_EQ((*j)["precision"], "bf16");
  EXPECT_EQ((*j)["inputs"][0]["datatype"], "INT64");
  EXPECT_EQ((*j)["inputs"][0]["dims"], nlohmann::json::array({8}));
  EXPECT_EQ((*j)["inputs"][0]["scope"], "user");
  EXPECT_EQ((*j)["inputs"][1]["ragged"], true);
  EXPECT_EQ((*j)["inputs"][1]["max_length"], 20);
  EXPECT_EQ((*j)["batching"]["preferred_batch_size"], nlohmann::json::array({64, 256}));
  EXPECT_EQ((*j)["batching"]["max_queue_delay_microseconds"], 200);
  EXPECT_EQ((*j)["batching"]["max_queue_size"], 100);
  EXPECT_EQ((*j)["batching"]["default_timeout_microseconds"], 5000);
  EXPECT_EQ((*j)["batching"]["max_batch_size"], 1024);
  EXPECT_EQ((*j)["buckets"]["cuda_graphs"], false);
  EXPECT_EQ((*j)["tables"]["tiers"]["item.weight"], "disk");
  EXPECT_EQ((*j)["tables"]["disk_dir"], "rows");
  EXPECT_EQ((*j)["tables"]["disk_cache_mb"], 512);
  EXPECT_EQ((*j)["tables"]["host_budget_mb"], 4096);
  EXPECT_EQ((*j)["version_policy"]["latest"]["num_versions"], 2);
  EXPECT_EQ((*j)["executors"], 2);  // instance_group's count
  const std::string named = Joined(unused);
  EXPECT_NE(named.find("model_warmup"), std::string::npos) << named;
  EXPECT_NE(named.find("response_cache"), std::string::npos) << named;  // a field the schema subset lacks
  EXPECT_NE(named.find("execution_accelerators"), std::string::npos) << named;
  EXPECT_EQ(named.find("instance_group.kind"), std::string::npos) << named;  // a GPU group: used
  EXPECT_FALSE(j->contains("gpus"));                                         // no group names GPUs: the server's --gpus
  EXPECT_NE(named.find("instance_group.rate_limiter"), std::string::npos) << named;
  EXPECT_NE(named.find("output 'score'"), std::string::npos) << named;
  EXPECT_NE(named.find("something_else"), std::string::npos) << named;
  EXPECT_EQ(named.find("precision"), std::string::npos) << named;  // used: not named
  EXPECT_EQ(unused.size(), 6u) << named;
}

// instance_group's gpus are where the replicas run and its count is per GPU, as in Triton.
TEST(TritonTextConfig, InstanceGroupGpusAreReplicas) {
  std::vector<std::string> unused;
  auto j = TritonTextConfigToJson(R"(name: "m" platform: "onnxruntime_onnx" max_batch_size: 8
    instance_group [ { count: 2 kind: KIND_GPU gpus: [ 1, 0 ] } ])",
                                  unused);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["gpus"], nlohmann::json::array({0, 1}));
  EXPECT_EQ((*j)["executors"], 2);
  EXPECT_TRUE(unused.empty()) << Joined(unused);
  auto config = ParseTritonModelConfig(
      R"(name: "m" max_batch_size: 8 instance_group [ { count: 3 gpus: [ 0 ] }, { gpus: [ 1 ] } ])");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->gpus.ids, (std::vector<int>{0, 1}));
  EXPECT_EQ(config->executors, 3);  // the most a GPU is given; the difference is named
  ASSERT_EQ(config->unused.size(), 1u);
  EXPECT_NE(config->unused[0].find("counts that differ by GPU (every replica gets 3 executors)"), std::string::npos)
      << config->unused[0];
  config = ParseTritonModelConfig(R"(name: "m" max_batch_size: 8 instance_group [ { count: 2 kind: KIND_CPU } ])");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config->gpus.empty());
  EXPECT_EQ(config->executors, 2);
  ASSERT_EQ(config->unused.size(), 1u);
  EXPECT_NE(config->unused[0].find("instance_group.kind KIND_CPU"), std::string::npos) << config->unused[0];
}

TEST(TritonTextConfig, RefusesWhatItCannotHonour) {
  auto refused = [](const std::string& text, const std::string& why) {
    std::vector<std::string> unused;
    auto j = TritonTextConfigToJson(text, unused);
    EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(j.status().message().find(why), std::string::npos) << j.status().ToString();
  };
  refused("max_batch_size: 8\ninput [ { name: \"a\" data_type: TYPE_NOPE } ]", "line 2");
  refused("max_batch_size: 8 input [ { name: ", "line 1");
  // A number outside Triton's enum (proto3 keeps it): found by fuzz_model_config, which crashed here.
  refused("max_batch_size: 8\ninput [ { name: \"a\" data_type: 32 dims: [ 1 ] } ]",
          "input 'a': data_type 32 is not one of Triton's TYPE_* values");
  refused("max_batch_size: \"eight\"", "line 1");
  refused("max_batch_size: 0", "max_batch_size must be positive");
  refused("max_batch_size: 8 platform: \"tensorrt_plan\"", "tensorrt_plan");
  refused("max_batch_size: 8 backend: \"python\"", "python");
  refused("max_batch_size: 8 default_model_filename: \"m.onnx\"", "m.onnx");
  refused("max_batch_size: 8 parameters { key: \"input.nope.scope\" value: { string_value: \"user\" } }", "nope");
  refused("max_batch_size: 8 parameters { key: \"tables.gpu_budget_mb\" value: { string_value: \"lots\" } }",
          "tables.gpu_budget_mb");
  refused("max_batch_size: 8 parameters { key: \"user_hoisting\" value: { string_value: \"maybe\" } }",
          "user_hoisting");
  // Unknown fields nested without end (protobuf's parser skips them by recursion, unbounded: 200,000
  // of them took the server down), in either delimiter; braces inside strings and comments do not count.
  std::string deep = "max_batch_size: 8\ndynamic_batching { ";
  for (int i = 0; i < 200000; ++i) deep += i % 2 ? "x { " : "y < ";
  for (int i = 199999; i >= 0; --i) deep += i % 2 ? "} " : "> ";
  refused(deep + "}", "messages nested more than 100 deep");
  std::vector<std::string> unused;
  std::string braces_in_strings = "max_batch_size: 8 # {{{{{\nparameters { key: \"" + std::string(300, '{') +
                                  "\" value: { string_value: \"" + std::string(300, '<') + "\" } }";
  auto ok = TritonTextConfigToJson(braces_in_strings, unused);
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
  std::string nested_50 = "max_batch_size: 8 nope ";
  for (int i = 0; i < 50; ++i) nested_50 += "{ a ";
  nested_50 += ": 1" + std::string(50, '}');
  unused.clear();
  ok = TritonTextConfigToJson(nested_50, unused);
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();  // skipped, and named as unused
  EXPECT_FALSE(unused.empty());
}

// A repository of din whose config is config.pbtxt.
fs::path PbtxtRepository(const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / ("rankd_pbtxt_" + std::to_string(getpid())) / "din";
  fs::remove_all(dir.parent_path());
  fs::create_directories(dir / "1");
  fs::copy_file(testing::SourcePath("models/zoo/din/1/model.onnx"), dir / "1" / "model.onnx");
  std::ofstream(dir / "config.pbtxt") << text;
  return dir;
}

// The model configuration API's answer for din, written as config.pbtxt, loads a model that scores
// as din with its own config.yaml.
TEST(TritonTextConfig, TheConfigurationApisAnswerLoadsBack) {
  auto yaml = Model::Load(testing::SourcePath("models/zoo/din"), -1);
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(TritonModelConfig(**yaml), &text));
  const fs::path dir = PbtxtRepository(text);
  auto config = LoadModelConfig(dir.string());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->inputs.size(), (*yaml)->config().inputs.size());
  for (size_t i = 0; i < config->inputs.size(); ++i) {
    const InputConfig &got = config->inputs[i], &want = (*yaml)->config().inputs[i];
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.dtype, want.dtype) << got.name;
    EXPECT_EQ(got.ragged, want.ragged) << got.name;
    EXPECT_EQ(got.scope, want.scope) << got.name;
    if (got.ragged) {
      EXPECT_EQ(got.max_length, want.max_length) << got.name;
    }
  }
  auto pbtxt = Model::Load(dir.string(), -1);
  ASSERT_TRUE(pbtxt.ok()) << pbtxt.status().ToString();
  for (int64_t rows : {1, 5}) {
    InferRequest r = (*yaml)->ExampleRequest(rows, 3);
    auto want = (*yaml)->Infer(r);
    auto got = (*pbtxt)->Infer(r);
    ASSERT_TRUE(want.ok() && got.ok()) << want.status().ToString() << " / " << got.status().ToString();
    EXPECT_LE(testing::RelativeError((*got)[0].data, (*want)[0].data), 1e-6);
  }
  fs::remove_all(dir.parent_path());
}

TEST(TritonTextConfig, AMalformedFileFailsTheLoadNamingIt) {
  const fs::path dir =
      PbtxtRepository("max_batch_size: 8\ninput [ { name: \"profile\" data_type: TYPE_INT64 dims: [ 8 ");
  auto model = Model::Load(dir.string(), -1);
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("config.pbtxt"), std::string::npos) << model.status().ToString();
  fs::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace rankd
