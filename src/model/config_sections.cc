// The sections of a model's config read from its JSON form (model/config_sections.h).
#include "model/config_sections.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "model/table_place.h"

namespace rankd::config_sections {

Status Expect(bool ok, const std::string& what) { return ok ? Status::Ok() : InvalidArgument("config: " + what); }

Status CheckKeys(const json& j, const std::set<std::string>& allowed, const std::string& where) {
  for (const auto& [key, value] : j.items()) {
    if (!allowed.count(key)) return InvalidArgument("config: unknown field '" + key + "' in " + where);
  }
  return Status::Ok();
}

namespace {

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

}  // namespace

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

}  // namespace rankd::config_sections
