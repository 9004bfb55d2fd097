#include "model/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/config_sections.h"
#include "model/triton_text_config.h"

namespace rankd {
namespace {

using config_sections::CheckKeys;
using config_sections::Expect;
using config_sections::ParseBatching;
using config_sections::ParseBuckets;
using config_sections::ParseGpus;
using config_sections::ParseInput;
using config_sections::ParseRouting;
using config_sections::ParseTables;
using nlohmann::json;

// YAML's aliases let a small file name a vast or deep tree (nine anchors of ten aliases each are
// 10^9 values: a config of 300 bytes once held a load until memory ran out), so the conversion
// below counts what it makes and stops past these (a config holds hundreds of values, and yaml-cpp
// takes about 5 µs a value here); yaml-cpp bounds the text's own nesting.
constexpr int kMaxYamlDepth = 64;
constexpr int64_t kMaxYamlValues = 100'000;
struct YamlTooLarge {};

// YAML -> JSON, so one parser reads both formats. Scalars become numbers or booleans when they
// parse as such. `values`: those made so far. Throws YamlTooLarge past the bounds above.
json YamlToJson(const YAML::Node& n, int depth, int64_t& values) {
  if (depth > kMaxYamlDepth || ++values > kMaxYamlValues) throw YamlTooLarge{};
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json j = json::object();
      for (const auto& kv : n) j[kv.first.as<std::string>()] = YamlToJson(kv.second, depth + 1, values);
      return j;
    }
    case YAML::NodeType::Sequence: {
      json j = json::array();
      for (const auto& e : n) j.push_back(YamlToJson(e, depth + 1, values));
      return j;
    }
    case YAML::NodeType::Scalar: {
      const std::string s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted
      if (s == "true" || s == "True") return true;
      if (s == "false" || s == "False") return false;
      try {
        size_t used = 0;
        long long v = std::stoll(s, &used);
        if (used == s.size()) return v;
        double d = std::stod(s, &used);
        if (used == s.size()) return d;
      } catch (const std::exception&) {
      }
      return s;
    }
    default:
      return nullptr;
  }
}

StatusOr<ModelConfig> ParseJson(const json& j) {
  RANKD_RETURN_IF_ERROR(Expect(j.is_object(), "the config must be a mapping"));
  RANKD_RETURN_IF_ERROR(CheckKeys(j,
                                  {"name", "platform", "backend", "max_batch_size", "inputs", "input", "outputs",
                                   "output", "version_policy", "precision", "batching", "dynamic_batching", "buckets",
                                   "tables", "user_hoisting", "executors", "gpus", "routing", "cpu_row_split"},
                                  "the config"));
  ModelConfig c;
  if (j.contains("name")) {
    RANKD_RETURN_IF_ERROR(Expect(j["name"].is_string(), "name must be a string"));
    c.name = j["name"];
  }
  if (j.contains("platform")) {
    std::string p = j["platform"].is_string() ? j["platform"].get<std::string>() : "";
    RANKD_RETURN_IF_ERROR(Expect(p == "onnx" || p == "onnxruntime_onnx", "platform must be 'onnx'"));
  }
  if (j.contains("max_batch_size")) {
    RANKD_RETURN_IF_ERROR(Expect(j["max_batch_size"].is_number_integer() && j["max_batch_size"].get<int64_t>() >= 0,
                                 "max_batch_size must be a non-negative integer"));
    c.max_batch_size = j["max_batch_size"];
  }
  for (const char* key : {"inputs", "input"}) {
    if (!j.contains(key)) continue;
    RANKD_RETURN_IF_ERROR(Expect(j[key].is_array(), std::string(key) + " must be a list"));
    for (size_t i = 0; i < j[key].size(); ++i) {
      RANKD_ASSIGN_OR_RETURN(InputConfig in, ParseInput(j[key][i], i));
      RANKD_RETURN_IF_ERROR(Expect(!c.FindInput(in.name), "input '" + in.name + "' is listed twice"));
      c.inputs.push_back(std::move(in));
    }
  }
  for (const char* key : {"outputs", "output"}) {
    if (!j.contains(key)) continue;
    RANKD_RETURN_IF_ERROR(Expect(j[key].is_array(), std::string(key) + " must be a list"));
    for (const auto& o : j[key]) {
      RANKD_RETURN_IF_ERROR(
          Expect(o.is_object() && o.contains("name") && o["name"].is_string(), "each output needs a name"));
      c.outputs.push_back({o["name"].get<std::string>()});
    }
  }
  if (j.contains("version_policy")) {
    const json& v = j["version_policy"];
    RANKD_RETURN_IF_ERROR(
        Expect(v.is_object() && v.size() == 1, "version_policy must have one of latest, all, specific"));
    if (v.contains("latest")) {
      const json& l = v["latest"];
      int64_t n = l.is_object() && l.contains("num_versions") ? l["num_versions"].get<int64_t>()
                  : l.is_number_integer()                     ? l.get<int64_t>()
                                                              : -1;
      RANKD_RETURN_IF_ERROR(Expect(n >= 1, "version_policy.latest needs num_versions >= 1"));
      c.version_policy.latest = n;
    } else if (v.contains("all")) {
      c.version_policy.kind = VersionPolicy::Kind::kAll;
    } else if (v.contains("specific")) {
      c.version_policy.kind = VersionPolicy::Kind::kSpecific;
      const json& s = v["specific"];
      const json& list = s.is_object() && s.contains("versions") ? s["versions"] : s;
      RANKD_RETURN_IF_ERROR(Expect(list.is_array() && !list.empty(), "version_policy.specific needs versions"));
      for (const auto& e : list) {
        RANKD_RETURN_IF_ERROR(
            Expect(e.is_number_integer() && e.get<int64_t>() > 0, "versions must be positive integers"));
        c.version_policy.versions.push_back(e);
      }
    } else {
      return InvalidArgument("config: version_policy must have one of latest, all, specific");
    }
  }
  if (j.contains("precision")) {
    const json& p = j["precision"];
    RANKD_RETURN_IF_ERROR(
        Expect(p.is_string() && (p == "fp32" || p == "tf32" || p == "bf16" || p == "bf16-activations"),
               "precision must be fp32, tf32, bf16 or bf16-activations"));
    c.precision = p;
  }
  if (j.contains("executors")) {
    RANKD_RETURN_IF_ERROR(Expect(j["executors"].is_number_integer() && j["executors"].get<int64_t>() >= 0 &&
                                     j["executors"].get<int64_t>() <= 1024,
                                 "executors must be an integer from 0 to 1024"));
    c.executors = j["executors"].get<int>();
  }
  if (j.contains("gpus")) {
    RANKD_ASSIGN_OR_RETURN(c.gpus, ParseGpus(j["gpus"]));
  }
  if (j.contains("user_hoisting")) {
    RANKD_RETURN_IF_ERROR(Expect(j["user_hoisting"].is_boolean(), "user_hoisting must be true or false"));
    c.user_hoisting = j["user_hoisting"];
  }
  for (const char* key : {"batching", "dynamic_batching"}) {
    if (!j.contains(key)) continue;
    RANKD_ASSIGN_OR_RETURN(c.batching, ParseBatching(j[key]));
  }
  if (j.contains("buckets")) {
    RANKD_ASSIGN_OR_RETURN(c.buckets, ParseBuckets(j["buckets"]));
  }
  if (j.contains("tables")) RANKD_RETURN_IF_ERROR(ParseTables(j["tables"], c));
  if (j.contains("routing")) {
    RANKD_ASSIGN_OR_RETURN(c.routing, ParseRouting(j["routing"]));
  }
  if (j.contains("cpu_row_split")) {
    RANKD_RETURN_IF_ERROR(Expect(j["cpu_row_split"].is_string(), "cpu_row_split must be auto, on or off"));
    RANKD_ASSIGN_OR_RETURN(c.cpu_row_split, ParseCpuRowSplit(j["cpu_row_split"].get<std::string>()));
  }
  return c;
}

}  // namespace

StatusOr<CpuRouting> ParseCpuRouting(const std::string& text) {
  if (text == "off") return CpuRouting::kOff;
  if (text == "fallback") return CpuRouting::kFallback;
  if (text == "rows") return CpuRouting::kRows;
  if (text == "cost") return CpuRouting::kCost;
  return InvalidArgument("config: routing.cpu must be off, fallback, rows or cost, not '" + text + "'");
}

const char* CpuRoutingName(CpuRouting routing) {
  switch (routing) {
    case CpuRouting::kFallback:
      return "fallback";
    case CpuRouting::kRows:
      return "rows";
    case CpuRouting::kCost:
      return "cost";
    case CpuRouting::kOff:
      break;
  }
  return "off";
}

StatusOr<CpuRowSplit> ParseCpuRowSplit(const std::string& text) {
  if (text == "auto") return CpuRowSplit::kAuto;
  if (text == "on") return CpuRowSplit::kOn;
  if (text == "off") return CpuRowSplit::kOff;
  return InvalidArgument("config: cpu_row_split must be auto, on or off, not '" + text + "'");
}

const char* CpuRowSplitName(CpuRowSplit split) {
  switch (split) {
    case CpuRowSplit::kOn:
      return "on";
    case CpuRowSplit::kOff:
      return "off";
    case CpuRowSplit::kAuto:
      break;
  }
  return "auto";
}

const InputConfig* ModelConfig::FindInput(const std::string& input) const {
  for (const InputConfig& in : inputs) {
    if (in.name == input) return &in;
  }
  return nullptr;
}

StatusOr<GpuSet> ParseGpuSet(const std::string& text) {
  GpuSet gpus;
  if (text == "all") {
    gpus.all = true;
    return gpus;
  }
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string piece = text.substr(start, end - start);
    int id = -1;
    auto [at, ec] = std::from_chars(piece.data(), piece.data() + piece.size(), id);
    if (piece.empty() || ec != std::errc() || at != piece.data() + piece.size() || id < 0 || id > 63)
      return InvalidArgument("'" + text + "' is not 'all' or GPU indices from 0 to 63 separated by commas");
    if (std::find(gpus.ids.begin(), gpus.ids.end(), id) != gpus.ids.end())
      return InvalidArgument("'" + text + "' names GPU " + std::to_string(id) + " twice");
    gpus.ids.push_back(id);
    start = end + 1;
  }
  return gpus;
}

std::string GpuSetText(const GpuSet& gpus) {
  if (gpus.all) return "all";
  std::string text;
  for (int id : gpus.ids) text += (text.empty() ? "" : ",") + std::to_string(id);
  return text;
}

StatusOr<ModelConfig> ParseModelConfig(const std::string& text, bool yaml) {
  json j;
  if (yaml) {
    try {
      int64_t values = 0;
      j = YamlToJson(YAML::Load(text), 0, values);
    } catch (const YAML::Exception& e) {
      return InvalidArgument(std::string("config: YAML parse error: ") + e.what());
    } catch (const YamlTooLarge&) {
      return InvalidArgument("config: the YAML nests more than " + std::to_string(kMaxYamlDepth) +
                             " deep or holds more than " + std::to_string(kMaxYamlValues) +
                             " values, its aliases expanded");
    }
  } else {
    j = json::parse(text, nullptr, false);
    if (j.is_discarded()) return InvalidArgument("config: JSON parse error");
  }
  try {  // a value of the wrong type where a check did not look first
    return ParseJson(j);
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("config: a value has the wrong type: ") + e.what());
  }
}

StatusOr<ModelConfig> ParseTritonModelConfig(const std::string& text) {
  std::vector<std::string> unused;
  RANKD_ASSIGN_OR_RETURN(json j, TritonTextConfigToJson(text, unused));
  StatusOr<ModelConfig> config = InvalidArgument("config: not read");
  try {  // converted to rankd's form, then read as any other
    config = ParseJson(j);
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("config: a value has the wrong type: ") + e.what());
  }
  if (config.ok()) config->unused = std::move(unused);
  return config;
}

StatusOr<ModelConfig> ParseTritonModelConfigJson(const std::string& text) {
  RANKD_ASSIGN_OR_RETURN(std::string as_text, TritonJsonConfigToText(text));
  return ParseTritonModelConfig(as_text);
}

StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  namespace fs = std::filesystem;
  for (const char* file : {"config.yaml", "config.yml", "config.json", "config.pbtxt"}) {
    fs::path p = fs::path(model_dir) / file;
    if (!fs::exists(p)) continue;
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    bool yaml = p.extension() != ".json";
    auto config = p.extension() == ".pbtxt" ? ParseTritonModelConfig(ss.str()) : ParseModelConfig(ss.str(), yaml);
    if (!config.ok()) return config.status().WithContext(p.string());
    for (auto& [name, keyed] : config->keyed_tables) {  // relative to the model's folder, as its versions are
      if (fs::path(keyed.path).is_relative()) keyed.path = (fs::path(model_dir) / keyed.path).string();
    }
    if (!config->table_disk_dir.empty() && fs::path(config->table_disk_dir).is_relative())
      config->table_disk_dir = (fs::path(model_dir) / config->table_disk_dir).string();
    return config;
  }
  ModelConfig c;
  c.derived = true;
  return c;
}

}  // namespace rankd
