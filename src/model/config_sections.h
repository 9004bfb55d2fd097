// The sections of a model's config (docs/config.md), each read from the config's JSON form (a
// YAML config converted, or Triton's config.pbtxt mapped onto rankd's keys) into model/config.h's
// structs, with an error that names the field. For model/config.cc, which reads the whole config;
// nothing else includes this (it brings nlohmann/json with it).
#pragma once

#include <cstddef>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "rankd/status.h"

namespace rankd::config_sections {

using nlohmann::json;

// OK when `ok`; else InvalidArgument("config: " + what).
Status Expect(bool ok, const std::string& what);
// An error naming the first key of the mapping `j` that `allowed` lacks (`where`: the mapping's place).
Status CheckKeys(const json& j, const std::set<std::string>& allowed, const std::string& where);

// The `index`-th entry of `inputs`.
StatusOr<InputConfig> ParseInput(const json& j, size_t index);
// `batching` (or Triton's `dynamic_batching`).
StatusOr<BatchingConfig> ParseBatching(const json& j);
StatusOr<RoutingConfig> ParseRouting(const json& j);
StatusOr<ShapeBucketsConfig> ParseBuckets(const json& j);
// `tables`, into the config's table fields.
Status ParseTables(const json& j, ModelConfig& c);
// gpus: "all", a list of GPU indices, or one index.
StatusOr<GpuSet> ParseGpus(const json& j);

}  // namespace rankd::config_sections
