#include "model/triton_text_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <set>

#include "model_config.pb.h"

namespace rankd {
namespace {

using nlohmann::json;

// Text-format errors kept with their line; unknown fields (skipped) kept as warnings.
class Collector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber, const std::string& message) override {
    if (error.empty()) error = "line " + std::to_string(line + 1) + ": " + message;
  }
  // The parser's words for a skipped field, 'Message type "T" has no field named "F".', become
  // "field 'F' (line N)" (with T when it is not the config itself); inside a message rankd reads
  // only to name (Skipped), nothing more is said: its field is named already.
  void AddWarning(int line, google::protobuf::io::ColumnNumber, const std::string& message) override {
    const std::string at = " (line " + std::to_string(line + 1) + ")";
    const size_t type = message.find("Message type \""), field = message.find("has no field named \"");
    if (type == std::string::npos || field == std::string::npos) {
      warnings.push_back(message + at);
      return;
    }
    const size_t type_end = message.find('"', type + 14), field_end = message.find('"', field + 20);
    const std::string type_name = message.substr(type + 14, type_end - type - 14);
    const std::string field_name = message.substr(field + 20, field_end - field - 20);
    if (type_name == "inference.Skipped") return;
    const std::string in = type_name == "inference.ModelConfig" ? "" : " in " + type_name.substr(10);
    warnings.push_back("field '" + field_name + "'" + in + at);
  }
  std::string error;
  std::vector<std::string> warnings;
};

// The deepest nesting of messages ({...} or <...>) in `text`, read with the tokenizer protobuf's
// text parser reads it with (strings and # comments as it sees them). That parser skips an unknown
// field's value by recursion without a bound: a config.pbtxt of 200,000 nested unknown messages ran
// a loading thread's stack out and took the server with it.
int MessageDepth(const std::string& text) {
  struct Quiet : google::protobuf::io::ErrorCollector {  // the parser reports the text's mistakes
    void AddError(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  } quiet;
  google::protobuf::io::ArrayInputStream input(text.data(), static_cast<int>(text.size()));
  google::protobuf::io::Tokenizer tokens(&input, &quiet);
  tokens.set_comment_style(google::protobuf::io::Tokenizer::SH_COMMENT_STYLE);
  int depth = 0, deepest = 0;
  while (tokens.Next()) {
    const google::protobuf::io::Tokenizer::Token& t = tokens.current();
    if (t.type != google::protobuf::io::Tokenizer::TYPE_SYMBOL) continue;
    if (t.text == "{" || t.text == "<") deepest = std::max(deepest, ++depth);
    if (t.text == "}" || t.text == ">") --depth;
  }
  return deepest;
}

StatusOr<int64_t> Integer(const std::string& key, const std::string& value) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size())
    return InvalidArgument("config.pbtxt: parameter '" + key + "' must be an integer, not '" + value + "'");
  return v;
}

StatusOr<bool> Boolean(const std::string& key, const std::string& value) {
  if (value == "true") return true;
  if (value == "false") return false;
  return InvalidArgument("config.pbtxt: parameter '" + key + "' must be true or false, not '" + value + "'");
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// rankd's own keys, from the config's parameters, into `j` (inputs by name in `inputs`).
Status ApplyParameter(const std::string& key, const std::string& value, json& j, std::map<std::string, json*>& inputs,
                      std::vector<std::string>& unused) {
  if (key == "precision" || key == "tables.dtype" || key == "tables.hotness_snapshot" || key == "tables.disk_dir" ||
      key == "cpu_row_split") {
    if (key == "precision") j["precision"] = value;
    if (key == "cpu_row_split") j["cpu_row_split"] = value;
    if (key == "tables.dtype") j["tables"]["dtype"] = value;
    if (key == "tables.hotness_snapshot") j["tables"]["hotness_snapshot"] = value;
    if (key == "tables.disk_dir") j["tables"]["disk_dir"] = value;
    return Status::Ok();
  }
  if (key == "user_hoisting") {
    RANKD_ASSIGN_OR_RETURN(j["user_hoisting"], Boolean(key, value));
    return Status::Ok();
  }
  if (key == "buckets.cuda_graphs") {
    RANKD_ASSIGN_OR_RETURN(j["buckets"]["cuda_graphs"], Boolean(key, value));
    return Status::Ok();
  }
  if (key == "tables.gpu_budget_mb" || key == "tables.disk_cache_mb" || key == "tables.host_budget_mb") {
    RANKD_ASSIGN_OR_RETURN(j["tables"][key.substr(7)], Integer(key, value));
    return Status::Ok();
  }
  if (key == "tables.shard_over_gpus") {
    RANKD_ASSIGN_OR_RETURN(j["tables"]["shard_over_gpus"], Boolean(key, value));
    return Status::Ok();
  }
  for (const char* prefix : {"tables.tiers.", "tables.cache_rows."}) {
    if (!StartsWith(key, prefix) || key.size() == std::string(prefix).size()) continue;
    const std::string table = key.substr(std::string(prefix).size());
    if (std::string(prefix) == "tables.tiers.") {
      j["tables"]["tiers"][table] = value;
    } else {
      RANKD_ASSIGN_OR_RETURN(j["tables"]["cache_rows"][table], Integer(key, value));
    }
    return Status::Ok();
  }
  if (key == "executors") {  // what the configuration API writes for the CPU's unbounded executors
    if (value == "unbounded") {
      j["executors"] = 0;
    } else {
      RANKD_ASSIGN_OR_RETURN(j["executors"], Integer(key, value));
    }
    return Status::Ok();
  }
  for (const char* name : {"max_batch_size", "max_queue_wait_microseconds", "executors"}) {
    if (key != std::string("batching.") + name) continue;
    if (!j.contains("batching")) {
      unused.push_back("parameter '" + key + "' (no dynamic_batching section)");
      return Status::Ok();
    }
    RANKD_ASSIGN_OR_RETURN(j["batching"][name], Integer(key, value));
    return Status::Ok();
  }
  if (StartsWith(key, "input.")) {
    const size_t dot = key.rfind('.');
    const std::string input = key.substr(6, dot > 6 ? dot - 6 : 0), field = key.substr(dot + 1);
    auto it = inputs.find(input);
    if (it == inputs.end()) {
      return InvalidArgument("config.pbtxt: parameter '" + key + "' names input '" + input +
                             "', which the config does not list");
    }
    if (field == "scope") {
      (*it->second)["scope"] = value;
      return Status::Ok();
    }
    if (field == "max_length") {
      RANKD_ASSIGN_OR_RETURN((*it->second)["max_length"], Integer(key, value));
      return Status::Ok();
    }
  }
  unused.push_back("parameter '" + key + "'");
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> TritonJsonConfigToText(const std::string& json_text) {
  inference::ModelConfig c;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;  // named in the error, never dropped
  auto parsed = google::protobuf::util::JsonStringToMessage(json_text, &c, options);
  if (!parsed.ok()) {
    return InvalidArgument("the config override is not Triton's model configuration in JSON: " +
                           std::string(parsed.message()));
  }
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(c, &text)) return Internal("the config override: not printable");
  return text;
}

StatusOr<json> TritonTextConfigToJson(const std::string& text, std::vector<std::string>& unused) {
  // Triton's schema nests a few messages deep; protobuf bounds the fields it knows at 100.
  constexpr int kMaxMessageDepth = 100;
  if (text.size() > static_cast<size_t>(INT32_MAX)) return InvalidArgument("config.pbtxt: larger than 2 GiB");
  if (MessageDepth(text) > kMaxMessageDepth) {
    return InvalidArgument("config.pbtxt: messages nested more than " + std::to_string(kMaxMessageDepth) + " deep");
  }
  inference::ModelConfig c;
  google::protobuf::TextFormat::Parser parser;
  Collector collector;
  parser.RecordErrorsTo(&collector);
  parser.AllowUnknownField(true);  // reported to the collector as warnings: named, never dropped silently
  if (!parser.ParseFromString(text, &c)) {
    return InvalidArgument("config.pbtxt: " +
                           (collector.error.empty() ? "not Triton's model configuration" : collector.error));
  }
  for (const std::string& w : collector.warnings) unused.push_back(w);
  // Set fields of the schema subset that the conversion below does not read (those known only so
  // that they parse: proto/model_config.proto's Skipped).
  static const std::set<std::string> kMapped = {
      "name",   "platform",         "backend",        "version_policy",         "max_batch_size", "input",
      "output", "dynamic_batching", "instance_group", "default_model_filename", "optimization",   "parameters"};
  std::vector<const google::protobuf::FieldDescriptor*> set;
  c.GetReflection()->ListFields(c, &set);
  for (const google::protobuf::FieldDescriptor* f : set) {
    if (!kMapped.count(f->name())) unused.push_back("field '" + f->name() + "'");
  }
  if (c.optimization().has_execution_accelerators()) unused.push_back("optimization.execution_accelerators");
  if (c.optimization().cuda().graph_spec_size() > 0) unused.push_back("optimization.cuda.graph_spec");
  json j = json::object();
  if (!c.name().empty()) j["name"] = c.name();
  if (!c.platform().empty() && c.platform() != "onnxruntime_onnx" && c.platform() != "onnx") {
    return InvalidArgument("config.pbtxt: platform '" + c.platform() +
                           "': rankd serves ONNX models (onnxruntime_onnx)");
  }
  if (!c.backend().empty() && c.backend() != "onnxruntime" && c.backend() != "rankd") {
    return InvalidArgument("config.pbtxt: backend '" + c.backend() + "': rankd serves ONNX models (onnxruntime)");
  }
  if (c.max_batch_size() <= 0) {
    return InvalidArgument("config.pbtxt: max_batch_size must be positive: rankd's inputs have a batch dimension (" +
                           std::to_string(c.max_batch_size()) + " given)");
  }
  j["max_batch_size"] = c.max_batch_size();
  if (!c.default_model_filename().empty() && c.default_model_filename() != "model.onnx") {
    return InvalidArgument("config.pbtxt: default_model_filename '" + c.default_model_filename() +
                           "': rankd reads VERSION/model.onnx");
  }
  std::map<std::string, json*> inputs;
  j["inputs"] = json::array();
  for (const inference::ModelInput& in : c.input()) {
    json entry = {{"name", in.name()}};
    std::string type = inference::DataType_Name(in.data_type());  // "" for a number outside the enum
    if (type.rfind("TYPE_", 0) != 0) {
      return InvalidArgument("config.pbtxt: input '" + in.name() + "': data_type " + std::to_string(in.data_type()) +
                             " is not one of Triton's TYPE_* values");
    }
    if (in.data_type() != inference::TYPE_INVALID) entry["datatype"] = type == "TYPE_STRING" ? "BYTES" : type.substr(5);
    if (in.allow_ragged_batch()) {
      entry["ragged"] = true;  // a list of ids per row: its dims ([-1]) say only that
    } else {
      entry["dims"] = json::array();
      for (int64_t d : in.dims()) entry["dims"].push_back(d);
    }
    if (in.optional()) unused.push_back("input '" + in.name() + "': optional (every input is required)");
    j["inputs"].push_back(std::move(entry));
  }
  for (json& entry : j["inputs"]) inputs[entry["name"].get<std::string>()] = &entry;
  j["outputs"] = json::array();
  for (const inference::ModelOutput& out : c.output()) {
    j["outputs"].push_back({{"name", out.name()}});
    if (out.data_type() != inference::TYPE_INVALID || out.dims_size() > 0)
      unused.push_back("output '" + out.name() + "': data_type and dims (the model's graph gives them)");
  }
  if (c.has_version_policy()) {
    const inference::ModelVersionPolicy& v = c.version_policy();
    if (v.has_latest()) j["version_policy"]["latest"]["num_versions"] = v.latest().num_versions();
    if (v.has_all()) j["version_policy"]["all"] = json::object();
    if (v.has_specific()) {
      j["version_policy"]["specific"]["versions"] = json::array();
      for (int64_t n : v.specific().versions()) j["version_policy"]["specific"]["versions"].push_back(n);
    }
  }
  if (c.has_dynamic_batching()) {
    const inference::ModelDynamicBatching& d = c.dynamic_batching();
    json b = {{"max_queue_delay_microseconds", d.max_queue_delay_microseconds()}};
    if (d.preferred_batch_size_size() > 0) {
      b["preferred_batch_size"] = json::array();
      for (int32_t n : d.preferred_batch_size()) b["preferred_batch_size"].push_back(n);
    }
    if (d.priority_levels() > 0) b["priority_levels"] = d.priority_levels();
    if (d.default_priority_level() > 0) b["default_priority_level"] = d.default_priority_level();
    if (d.preserve_ordering())
      unused.push_back("dynamic_batching.preserve_ordering (answers go out as they are ready)");
    if (d.has_default_queue_policy()) {
      const inference::ModelQueuePolicy& q = d.default_queue_policy();
      if (q.default_timeout_microseconds() > 0) b["default_timeout_microseconds"] = q.default_timeout_microseconds();
      if (q.max_queue_size() > 0) b["max_queue_size"] = q.max_queue_size();
      if (q.timeout_action() != inference::ModelQueuePolicy::REJECT)
        unused.push_back("dynamic_batching.default_queue_policy.timeout_action DELAY (late requests are rejected)");
      if (!q.allow_timeout_override() && q.default_timeout_microseconds() > 0)
        unused.push_back(
            "dynamic_batching.default_queue_policy.allow_timeout_override false (requests may set theirs)");
    }
    j["batching"] = std::move(b);
  }
  // instance_group: its count is the model's executors per replica, its gpus where the replicas
  // run (a group without gpus counts on every replica; the server's --gpus when none names any).
  std::map<int, int64_t> per_gpu;  // executors by GPU, from the groups that name it
  int64_t everywhere = 0;          // from the groups that name none
  for (const inference::ModelInstanceGroup& g : c.instance_group()) {
    const int64_t n = std::max(g.count(), 1);  // Triton's default count is 1
    if (g.kind() == inference::ModelInstanceGroup::KIND_CPU || g.kind() == inference::ModelInstanceGroup::KIND_MODEL)
      unused.push_back("instance_group.kind " + inference::ModelInstanceGroup::Kind_Name(g.kind()) +
                       " (a model runs on the server's --backend)");
    if (g.gpus_size() == 0) everywhere += n;
    for (int gpu : g.gpus()) per_gpu[gpu] += n;
    if (g.has_rate_limiter() || g.secondary_devices_size() > 0) unused.push_back("instance_group.rate_limiter");
  }
  int64_t count = everywhere;
  if (!per_gpu.empty()) {
    json gpus = json::array();
    int64_t least = INT64_MAX, most = 0;
    for (const auto& [gpu, n] : per_gpu) {
      gpus.push_back(gpu);
      least = std::min(least, n);
      most = std::max(most, n);
    }
    j["gpus"] = std::move(gpus);
    count += most;
    if (least != most)
      unused.push_back("instance_group counts that differ by GPU (every replica gets " +
                       std::to_string(std::min<int64_t>(count, 1024)) + " executors)");
  }
  if (count > 0) j["executors"] = std::min<int64_t>(count, 1024);
  if (c.has_optimization() && c.optimization().has_cuda())
    j["buckets"]["cuda_graphs"] = c.optimization().cuda().graphs();
  std::map<std::string, std::string> parameters;  // in key order: the warnings come out the same each time
  for (const auto& [key, value] : c.parameters()) parameters[key] = value.string_value();
  for (const auto& [key, value] : parameters) RANKD_RETURN_IF_ERROR(ApplyParameter(key, value, j, inputs, unused));
  return j;
}

}  // namespace rankd
