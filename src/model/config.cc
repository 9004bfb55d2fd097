#include "model/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <type_traits>

#include "model/table_place.h"
#include "model/triton_text_config.h"

namespace rankd {
namespace {

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

Status Expect(bool ok, const std::string& what) { return ok ? Status::Ok() : InvalidArgument("config: " + what); }

Status CheckKeys(const json& j, const std::set<std::string>& allowed, const std::string& where) {
  for (const auto& [key, value] : j.items()) {
    if (!allowed.count(key)) return InvalidArgument("config: unknown field '" + key + "' in " + where);
  }
  return Status::Ok();
}

// A BYTES input's `hash`, `split`, `utf8` and `max_string_bytes` (docs/strings.md).
Status ParseStrings(const json& j, const std::string& where, InputConfig::Strings& s) {
  for (const char* key : {"hash", "split", "utf8", "max_string_bytes"}) {
    if (j.contains(key) && !s.bytes) return InvalidArgument("config: " + where + ": " + key + " needs datatype BYTES");
  }
  if (!s.bytes) return Status::Ok();
  if (j.contains("hash")) {
    const json& h = j["hash"];
    RANKD_RETURN_IF_ERROR(Expect(h.is_object(), where + ": hash must be a mapping"));
    RANKD_RETURN_IF_ERROR(CheckKeys(h, {"function", "buckets", "seed"}, where + ": hash"));
    RANKD_RETURN_IF_ERROR(Expect(h.contains("function") && h["function"].is_string(),
                                 where + ": hash needs a 'function' (fingerprint64, xxhash64 or murmur3_32)"));
    s.hash = StringHashFromName(h["function"].get<std::string>());
    RANKD_RETURN_IF_ERROR(Expect(s.hash.has_value(), where + ": unknown hash function '" +
                                                         h["function"].get<std::string>() +
                                                         "' (fingerprint64, xxhash64 or murmur3_32)"));
    RANKD_RETURN_IF_ERROR(
        Expect(h.contains("buckets") && h["buckets"].is_number_integer() && h["buckets"].get<int64_t>() > 0,
               where + ": hash needs 'buckets', a positive integer"));
    s.buckets = h["buckets"];
    if (h.contains("seed")) {
      const json& seed = h["seed"];
      RANKD_RETURN_IF_ERROR(Expect(
          seed.is_number_integer() && (seed.is_number_unsigned() || seed.get<int64_t>() >= 0) &&
              MaxStringHashSeed(*s.hash) > 0 && h["seed"].get<uint64_t>() <= MaxStringHashSeed(*s.hash),
          where + ": " + StringHashName(*s.hash) +
              (MaxStringHashSeed(*s.hash) > 0 ? " takes a seed from 0 to " + std::to_string(MaxStringHashSeed(*s.hash))
                                              : " takes no seed")));
      s.seed = h["seed"];
    }
  }
  if (j.contains("split")) {
    RANKD_RETURN_IF_ERROR(Expect(j["split"].is_string() && !j["split"].get<std::string>().empty(),
                                 where + ": split must be a non-empty delimiter"));
    s.split = j["split"];
  }
  if (j.contains("utf8")) {
    RANKD_RETURN_IF_ERROR(Expect(j["utf8"].is_boolean(), where + ": utf8 must be true or false"));
    s.utf8 = j["utf8"];
  }
  if (j.contains("max_string_bytes")) {
    RANKD_RETURN_IF_ERROR(Expect(j["max_string_bytes"].is_number_integer() &&
                                     j["max_string_bytes"].get<int64_t>() > 0 &&
                                     j["max_string_bytes"].get<int64_t>() <= (int64_t{1} << 30),
                                 where + ": max_string_bytes must be a positive integer up to 2^30"));
    s.max_bytes = j["max_string_bytes"];
  }
  return Expect(s.hash.has_value() || !s.split.empty(),
                where + ": a BYTES input needs 'hash' (strings to ids) or 'split' (a delimited list of ids)");
}

StatusOr<InputConfig> ParseInput(const json& j, size_t index) {
  std::string where = "inputs[" + std::to_string(index) + "]";
  RANKD_RETURN_IF_ERROR(Expect(j.is_object(), where + " must be a mapping"));
  RANKD_RETURN_IF_ERROR(CheckKeys(j,
                                  {"name", "datatype", "dims", "shape", "scope", "ragged", "max_length", "offsets",
                                   "paired_with", "hash", "split", "utf8", "max_string_bytes"},
                                  where));
  InputConfig in;
  RANKD_RETURN_IF_ERROR(Expect(j.contains("name") && j["name"].is_string(), where + ".name must be a string"));
  in.name = j["name"];
  where = "input '" + in.name + "'";
  if (j.contains("datatype")) {
    RANKD_RETURN_IF_ERROR(Expect(j["datatype"].is_string(), where + ": datatype must be a string"));
    std::string dt = j["datatype"];
    if (dt == "STRING" || dt == "BYTES") {
      in.strings.bytes = true;  // the ids' type is the graph's
    } else {
      auto t = DTypeFromName(dt);
      RANKD_RETURN_IF_ERROR(Expect(t.has_value(), where + ": unknown datatype '" + dt + "'"));
      in.dtype = *t;
    }
  }
  for (const char* key : {"dims", "shape"}) {
    if (!j.contains(key)) continue;
    RANKD_RETURN_IF_ERROR(Expect(j[key].is_array(), where + ": " + key + " must be a list"));
    for (const auto& d : j[key]) {
      RANKD_RETURN_IF_ERROR(
          Expect(d.is_number_integer() && d.get<int64_t>() >= -1, where + ": dims must be integers >= -1"));
      in.dims.push_back(d.get<int64_t>());
    }
  }
  if (j.contains("scope")) {
    std::string s = j["scope"].is_string() ? j["scope"].get<std::string>() : "";
    RANKD_RETURN_IF_ERROR(Expect(s == "user" || s == "item", where + ": scope must be 'user' or 'item'"));
    in.scope = s == "user" ? InputScope::kUser : InputScope::kItem;
  }
  if (j.contains("ragged")) {
    RANKD_RETURN_IF_ERROR(Expect(j["ragged"].is_boolean(), where + ": ragged must be true or false"));
    in.ragged = j["ragged"];
  }
  if (j.contains("offsets")) {
    RANKD_RETURN_IF_ERROR(Expect(j["offsets"].is_string() && in.ragged,
                                 where + ": offsets names the graph input of a ragged input's bag starts"));
    in.offsets_input = j["offsets"];
  }
  if (j.contains("paired_with")) {
    RANKD_RETURN_IF_ERROR(Expect(j["paired_with"].is_string() && in.ragged && in.offsets_input.empty(),
                                 where + ": paired_with names the ragged ids a ragged input's values weight "
                                         "(without offsets)"));
    in.paired_with = j["paired_with"];
  }
  if (j.contains("max_length")) {
    RANKD_RETURN_IF_ERROR(Expect(j["max_length"].is_number_integer() && j["max_length"].get<int64_t>() > 0,
                                 where + ": max_length must be a positive integer"));
    in.max_length = j["max_length"];
  }
  RANKD_RETURN_IF_ERROR(ParseStrings(j, where, in.strings));
  return in;
}

StatusOr<std::vector<int64_t>> ParseSizes(const json& j, const std::string& where);

StatusOr<BatchingConfig> ParseBatching(const json& j) {
  RANKD_RETURN_IF_ERROR(Expect(j.is_object(), "batching must be a mapping"));
  RANKD_RETURN_IF_ERROR(CheckKeys(
      j,
      {"enabled", "max_queue_delay_microseconds", "max_batch_size", "max_queue_size", "max_queue_wait_microseconds",
       "default_timeout_microseconds", "priority_levels", "default_priority_level", "executors", "preferred_batch_size",
       "cost_per_row", "cost_per_sequence_element", "cost_per_request", "cost_budget"},
      "batching"));
  BatchingConfig b;
  b.configured = true;
  b.max_queue_delay_microseconds = 500;
  if (j.contains("enabled")) {
    RANKD_RETURN_IF_ERROR(Expect(j["enabled"].is_boolean(), "batching.enabled must be true or false"));
    b.enabled = j["enabled"];
  }
  auto integer = [&](const char* key, auto& field, int64_t min) -> Status {
    if (!j.contains(key)) return Status::Ok();
    const json& v = j[key];
    RANKD_RETURN_IF_ERROR(
        Expect(v.is_number_integer() && v.get<int64_t>() >= min && v.get<int64_t>() <= (int64_t{1} << 40),
               std::string("batching.") + key + " must be an integer >= " + std::to_string(min)));
    field = static_cast<std::remove_reference_t<decltype(field)>>(v.get<int64_t>());
    return Status::Ok();
  };
  RANKD_RETURN_IF_ERROR(integer("max_queue_delay_microseconds", b.max_queue_delay_microseconds, 0));
  RANKD_RETURN_IF_ERROR(integer("max_batch_size", b.max_batch_size, 0));
  RANKD_RETURN_IF_ERROR(integer("max_queue_size", b.max_queue_size, 1));
  RANKD_RETURN_IF_ERROR(integer("max_queue_wait_microseconds", b.max_queue_wait_microseconds, 0));
  RANKD_RETURN_IF_ERROR(integer("default_timeout_microseconds", b.default_timeout_microseconds, 0));
  RANKD_RETURN_IF_ERROR(integer("priority_levels", b.priority_levels, 0));
  RANKD_RETURN_IF_ERROR(integer("default_priority_level", b.default_priority_level, 0));
  RANKD_RETURN_IF_ERROR(integer("executors", b.executors, 0));
  RANKD_RETURN_IF_ERROR(Expect(b.default_priority_level <= b.priority_levels,
                               "batching.default_priority_level must be within priority_levels"));
  for (auto [key, field] :
       {std::pair{"cost_per_row", &b.cost_per_row},
        std::pair{"cost_per_sequence_element", &b.cost_per_sequence_element},
        std::pair{"cost_per_request", &b.cost_per_request}, std::pair{"cost_budget", &b.cost_budget}}) {
    if (!j.contains(key)) continue;
    RANKD_RETURN_IF_ERROR(Expect(j[key].is_number() && j[key].get<double>() >= 0 && std::isfinite(j[key].get<double>()),
                                 std::string("batching.") + key + " must be a number >= 0"));
    *field = j[key];
  }
  RANKD_RETURN_IF_ERROR(Expect(b.cost_budget != 0, "batching.cost_budget must be positive"));
  if (j.contains("preferred_batch_size")) {
    RANKD_ASSIGN_OR_RETURN(b.preferred_batch_size,
                           ParseSizes(j["preferred_batch_size"], "batching.preferred_batch_size"));
  }
  return b;
}

// A list of positive integers, ascending and without repeats once read.
StatusOr<std::vector<int64_t>> ParseSizes(const json& j, const std::string& where) {
  RANKD_RETURN_IF_ERROR(
      Expect(j.is_array() && !j.empty() && j.size() <= 64, where + " must be a list of 1 to 64 sizes"));
  std::vector<int64_t> sizes;
  for (const json& v : j) {
    RANKD_RETURN_IF_ERROR(
        Expect(v.is_number_integer() && v.get<int64_t>() > 0 && v.get<int64_t>() <= (int64_t{1} << 30),
               where + " must hold positive integers"));
    sizes.push_back(v.get<int64_t>());
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

StatusOr<RoutingConfig> ParseRouting(const json& j) {
  RANKD_RETURN_IF_ERROR(Expect(j.is_object(), "routing must be a mapping"));
  RANKD_RETURN_IF_ERROR(CheckKeys(j, {"cpu", "cpu_max_rows", "cpu_runs"}, "routing"));
  RoutingConfig r;
  if (j.contains("cpu")) {
    RANKD_RETURN_IF_ERROR(Expect(j["cpu"].is_string(), "routing.cpu must be off, fallback, rows or cost"));
    RANKD_ASSIGN_OR_RETURN(r.cpu, ParseCpuRouting(j["cpu"].get<std::string>()));
  }
  for (auto [key, limit] : {std::pair{"cpu_max_rows", int64_t{1} << 30}, std::pair{"cpu_runs", int64_t{1024}}}) {
    if (!j.contains(key)) continue;
    const json& v = j[key];
    RANKD_RETURN_IF_ERROR(
        Expect(v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= limit,
               std::string("routing.") + key + " must be an integer from 1 to " + std::to_string(limit)));
  }
  if (j.contains("cpu_max_rows")) r.cpu_max_rows = j["cpu_max_rows"].get<int64_t>();
  if (j.contains("cpu_runs")) r.cpu_runs = j["cpu_runs"].get<int>();
  RANKD_RETURN_IF_ERROR(Expect((r.cpu == CpuRouting::kRows) == (r.cpu_max_rows > 0),
                               "routing.cpu_max_rows is given with routing.cpu: rows, and only then"));
  return r;
}

StatusOr<ShapeBucketsConfig> ParseBuckets(const json& j) {
  RANKD_RETURN_IF_ERROR(Expect(j.is_object(), "buckets must be a mapping"));
  RANKD_RETURN_IF_ERROR(CheckKeys(j,
                                  {"enabled", "allowed_batch_sizes", "allowed_lengths", "cuda_graphs",
                                   "warmup_max_batch_size", "max_graph_memory_mb"},
                                  "buckets"));
  ShapeBucketsConfig b;
  b.enabled = 1;  // the section's presence turns buckets on
  bool enabled = true;
  for (auto [key, field] : {std::pair{"enabled", &enabled}, std::pair{"cuda_graphs", &b.cuda_graphs}}) {
    if (!j.contains(key)) continue;
    RANKD_RETURN_IF_ERROR(Expect(j[key].is_boolean(), std::string("buckets.") + key + " must be true or false"));
    *field = j[key];
  }
  b.enabled = enabled ? 1 : 0;
  if (j.contains("allowed_batch_sizes")) {
    RANKD_ASSIGN_OR_RETURN(b.allowed_batch_sizes, ParseSizes(j["allowed_batch_sizes"], "buckets.allowed_batch_sizes"));
  }
  if (j.contains("allowed_lengths")) {
    RANKD_ASSIGN_OR_RETURN(b.allowed_lengths, ParseSizes(j["allowed_lengths"], "buckets.allowed_lengths"));
  }
  for (auto [key, field] : {std::pair{"warmup_max_batch_size", &b.warmup_max_batch_size},
                            std::pair{"max_graph_memory_mb", &b.max_graph_memory_mb}}) {
    if (!j.contains(key)) continue;
    RANKD_RETURN_IF_ERROR(
        Expect(j[key].is_number_integer() && j[key].get<int64_t>() >= 0 && j[key].get<int64_t>() <= (int64_t{1} << 30),
               std::string("buckets.") + key + " must be an integer >= 0"));
    *field = j[key];
  }
  return b;
}

Status ParseTables(const json& j, ModelConfig& c) {
  if (j.is_null()) return Status::Ok();
  RANKD_RETURN_IF_ERROR(Expect(j.is_object(), "tables must be a mapping"));
  RANKD_RETURN_IF_ERROR(CheckKeys(j,
                                  {"dtype", "gpu_budget_mb", "tiers", "cache_rows", "hotness_snapshot", "keyed",
                                   "shard_over_gpus", "disk_dir", "disk_cache_mb", "host_budget_mb"},
                                  "tables"));
  if (j.contains("dtype")) {
    const json& d = j["dtype"];
    DType dtype = d.is_string() ? DTypeFromName(d.get<std::string>()).value_or(DType::kInvalid) : DType::kInvalid;
    RANKD_RETURN_IF_ERROR(Expect(dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16,
                                 "tables.dtype must be FP32, BF16 or FP16"));
    c.table_dtype = dtype;
  }
  if (j.contains("gpu_budget_mb")) {
    const json& b = j["gpu_budget_mb"];
    RANKD_RETURN_IF_ERROR(
        Expect(b.is_number_integer() && b.get<int64_t>() >= 0 && b.get<int64_t>() <= (int64_t{1} << 40),
               "tables.gpu_budget_mb must be an integer >= 0"));
    c.table_gpu_budget_mb = b;
  }
  if (j.contains("shard_over_gpus")) {
    RANKD_RETURN_IF_ERROR(Expect(j["shard_over_gpus"].is_boolean(), "tables.shard_over_gpus must be true or false"));
    c.table_shard_over_gpus = j["shard_over_gpus"];
  }
  if (j.contains("tiers")) {
    RANKD_RETURN_IF_ERROR(
        Expect(j["tiers"].is_object(), "tables.tiers must map table names to gpu, gpu:N, cache, host or disk"));
    for (const auto& [name, tier] : j["tiers"].items()) {
      const std::string text = tier.is_string() ? tier.get<std::string>() : "";
      RANKD_RETURN_IF_ERROR(
          Expect(ParseTablePlaceText(text).has_value(),
                 "tables.tiers." + name + " must be gpu, gpu:N or gpu:N,M,... (GPU indices), cache, host or disk"));
      c.table_tiers[name] = text;
    }
  }
  if (j.contains("cache_rows")) {
    RANKD_RETURN_IF_ERROR(Expect(j["cache_rows"].is_object(), "tables.cache_rows must map table names to rows"));
    for (const auto& [name, rows] : j["cache_rows"].items()) {
      RANKD_RETURN_IF_ERROR(
          Expect(rows.is_number_integer() && rows.get<int64_t>() >= 1 && rows.get<int64_t>() <= (int64_t{1} << 31) - 1,
                 "tables.cache_rows." + name + " must be an integer from 1 to 2^31 - 1"));
      RANKD_RETURN_IF_ERROR(Expect(!c.table_tiers.count(name) || c.table_tiers[name] == "cache",
                                   "tables.cache_rows." + name + " caches a table tables.tiers puts elsewhere"));
      c.table_cache_rows[name] = rows;
    }
  }
  if (j.contains("disk_dir")) {
    const json& dir = j["disk_dir"];
    RANKD_RETURN_IF_ERROR(
        Expect(dir.is_string() && !dir.get<std::string>().empty(), "tables.disk_dir must be a folder's path"));
    c.table_disk_dir = dir;
  }
  if (j.contains("disk_cache_mb")) {
    const json& b = j["disk_cache_mb"];
    RANKD_RETURN_IF_ERROR(
        Expect(b.is_number_integer() && b.get<int64_t>() >= 0 && b.get<int64_t>() <= (int64_t{1} << 40),
               "tables.disk_cache_mb must be an integer >= 0"));
    c.table_disk_cache_mb = b;
  }
  if (j.contains("host_budget_mb")) {
    const json& b = j["host_budget_mb"];
    RANKD_RETURN_IF_ERROR(
        Expect(b.is_number_integer() && b.get<int64_t>() >= 0 && b.get<int64_t>() <= (int64_t{1} << 40),
               "tables.host_budget_mb must be an integer >= 0"));
    RANKD_RETURN_IF_ERROR(Expect(!j.contains("disk_cache_mb"),
                                 "tables.disk_cache_mb and tables.host_budget_mb both size the host caches of "
                                 "tables on disk: give one"));
    c.table_host_budget_mb = b;
  }
  if (j.contains("hotness_snapshot")) {
    const json& path = j["hotness_snapshot"];
    RANKD_RETURN_IF_ERROR(
        Expect(path.is_string() && !path.get<std::string>().empty(), "tables.hotness_snapshot must be a file path"));
    c.table_hotness_snapshot = path;
  }
  if (j.contains("keyed")) {
    RANKD_RETURN_IF_ERROR(Expect(j["keyed"].is_object(), "tables.keyed must map table names to their key files"));
    for (const auto& [name, table] : j["keyed"].items()) {
      const std::string field = "tables.keyed." + name;
      RANKD_RETURN_IF_ERROR(Expect(table.is_object(), field + " must be a mapping with a path"));
      RANKD_RETURN_IF_ERROR(CheckKeys(table, {"path", "default_value"}, field));
      KeyedTableConfig keyed;
      RANKD_RETURN_IF_ERROR(
          Expect(table.contains("path") && table["path"].is_string() && !table["path"].get<std::string>().empty(),
                 field + ".path must name the folder of its key and emb_vector files"));
      keyed.path = table["path"];
      if (table.contains("default_value")) {
        const json& v = table["default_value"];
        RANKD_RETURN_IF_ERROR(
            Expect(v.is_number() && std::isfinite(v.get<double>()), field + ".default_value must be a finite number"));
        keyed.default_value = static_cast<float>(v.get<double>());
      }
      c.keyed_tables[name] = keyed;
    }
  }
  return Status::Ok();
}

// gpus: "all", a list of GPU indices, or one index.
StatusOr<GpuSet> ParseGpus(const json& j) {
  std::string text;
  if (j.is_string()) {
    text = j.get<std::string>();
  } else if (j.is_number_integer()) {
    text = std::to_string(j.get<int64_t>());
  } else {
    RANKD_RETURN_IF_ERROR(Expect(j.is_array() && !j.empty(), "gpus must be 'all' or a list of GPU indices"));
    for (const json& g : j) {
      RANKD_RETURN_IF_ERROR(Expect(g.is_number_integer(), "gpus must be 'all' or a list of GPU indices"));
      text += (text.empty() ? "" : ",") + std::to_string(g.get<int64_t>());
    }
  }
  auto gpus = ParseGpuSet(text);
  if (!gpus.ok()) return InvalidArgument("gpus: " + std::string(gpus.status().message()));
  return gpus;
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

// A BYTES input: its ids fit the graph's integer input; a split one is ragged.
Status CheckStringsInput(const InputConfig& in, const Value& v) {
  const std::string where = "config: input '" + v.name + "' (BYTES): ";
  if (v.dtype != DType::kI64 && v.dtype != DType::kI32) {
    return InvalidArgument(where + "the model takes " + DTypeName(v.dtype) + "; strings become INT64 or INT32 ids");
  }
  if (!in.strings.split.empty() && !in.ragged) {
    return InvalidArgument(where + "split makes a list of ids per row: the input must be ragged");
  }
  if (in.strings.hash && v.dtype == DType::kI32 && in.strings.buckets > INT32_MAX) {
    return InvalidArgument(where + "buckets up to " + std::to_string(INT32_MAX) + " for an INT32 input");
  }
  return Status::Ok();
}

Status ResolveModelConfig(const Graph& graph, ModelConfig& config) {
  // Every config input must exist in the graph; every graph input gets a config entry.
  for (const InputConfig& in : config.inputs) {
    if (graph.FindValue(in.name) < 0 ||
        std::find(graph.inputs.begin(), graph.inputs.end(), graph.FindValue(in.name)) == graph.inputs.end()) {
      return InvalidArgument("config: input '" + in.name + "' is not an input of the model");
    }
  }
  std::vector<InputConfig> ordered;
  std::set<std::string> offsets_inputs;  // fed by rankd, not sent
  for (const InputConfig& in : config.inputs) {
    if (in.offsets_input.empty()) continue;
    const int id = graph.FindValue(in.offsets_input);
    if (id < 0 || std::find(graph.inputs.begin(), graph.inputs.end(), id) == graph.inputs.end() ||
        (graph.values[static_cast<size_t>(id)].dtype != DType::kI64 &&
         graph.values[static_cast<size_t>(id)].dtype != DType::kInvalid)) {
      return InvalidArgument("config: input '" + in.name + "': offsets '" + in.offsets_input +
                             "' is not an INT64 input of the model");
    }
    if (config.FindInput(in.offsets_input)) {
      return InvalidArgument("config: input '" + in.offsets_input +
                             "' is a ragged input's offsets: it is fed by rankd, not listed or sent");
    }
    offsets_inputs.insert(in.offsets_input);  // several: ids and their per-sample weights share the starts
  }
  // Per-id values (FP32, a per-sample weight an id) ride beside the ids whose bags' starts they share.
  // Or they weight the slots of padded ragged ids they are paired with (the same lengths).
  auto ids_input = [&](const InputConfig& other) {
    const int id = graph.FindValue(other.name);
    const DType d = id >= 0 ? graph.values[static_cast<size_t>(id)].dtype : DType::kInvalid;
    return other.ragged && (d == DType::kI64 || d == DType::kI32);
  };
  auto beside_ids = [&](const InputConfig& in) {
    if (!in.offsets_input.empty()) {
      return std::any_of(config.inputs.begin(), config.inputs.end(), [&](const InputConfig& other) {
        return other.offsets_input == in.offsets_input && ids_input(other);
      });
    }
    const InputConfig* ids = in.paired_with.empty() ? nullptr : config.FindInput(in.paired_with);
    return ids && ids_input(*ids) && ids->offsets_input.empty() && ids->scope == in.scope;
  };
  for (int id : graph.inputs) {
    const Value& v = graph.values[static_cast<size_t>(id)];
    if (offsets_inputs.count(v.name)) continue;
    const InputConfig* given = config.FindInput(v.name);
    InputConfig in = given ? *given : InputConfig{};
    in.name = v.name;
    if (in.dtype == DType::kInvalid) in.dtype = v.dtype;
    if (in.dtype != DType::kInvalid && in.dtype != v.dtype) {
      return InvalidArgument(std::string("config: input '") + v.name + "' is declared " + DTypeName(in.dtype) +
                             " but the model takes " + DTypeName(v.dtype));
    }
    if (in.strings.bytes) RANKD_RETURN_IF_ERROR(CheckStringsInput(in, v));
    if (v.rank_known && v.shape.empty()) {
      return InvalidArgument("input '" + v.name + "' is a scalar; rankd needs a batch dimension first");
    }
    if (in.ragged) {
      if (v.dtype != DType::kI64 && v.dtype != DType::kI32 && !(v.dtype == DType::kF32 && beside_ids(in))) {
        return InvalidArgument("config: ragged input '" + v.name +
                               "' must be integer ids, or FP32 values an id sharing the offsets of ids or "
                               "paired_with ragged ids of the same scope");
      }
      if (!in.paired_with.empty() && v.dtype != DType::kF32) {
        return InvalidArgument("config: input '" + v.name + "' is paired_with ragged ids: it must be FP32 values");
      }
      if (v.rank_known && v.shape.size() != (in.offsets_input.empty() ? 2u : 1u)) {
        return InvalidArgument("config: ragged input '" + v.name + "' must be " +
                               (in.offsets_input.empty() ? "[batch, length]" : "flat ids [n] (with offsets)") +
                               " in the model");
      }
      in.dims = {-1};
    } else if (in.dims.empty() && v.rank_known) {
      in.dims.assign(v.shape.begin() + 1, v.shape.end());
    } else if (v.rank_known && in.dims.size() + 1 != v.shape.size()) {
      return InvalidArgument("config: input '" + v.name + "' has " + std::to_string(in.dims.size()) +
                             " dims per row; the model's input has rank " + std::to_string(v.shape.size()));
    }
    ordered.push_back(std::move(in));
  }
  config.inputs = std::move(ordered);
  if (config.outputs.empty()) {
    for (int id : graph.outputs) config.outputs.push_back({graph.values[static_cast<size_t>(id)].name});
  }
  for (const OutputConfig& out : config.outputs) {
    bool found = false;
    for (int id : graph.outputs) found = found || graph.values[static_cast<size_t>(id)].name == out.name;
    if (!found) return InvalidArgument("config: output '" + out.name + "' is not an output of the model");
  }
  return Status::Ok();
}

}  // namespace rankd
