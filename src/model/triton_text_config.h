// Triton's config.pbtxt (protobuf text of Triton's ModelConfig, proto/model_config.proto) read as
// rankd's own config: the fields that mean something to rankd become the JSON form ParseModelConfig
// reads (docs/config.md), and every field rankd does not use is named in one warning.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rankd/status.h"

namespace rankd {

// `text` (a config.pbtxt) as rankd's JSON config. Mapped: name, platform / backend (ONNX only),
// max_batch_size (> 0: rankd's inputs have a batch dimension), input (data_type, dims,
// allow_ragged_batch -> ragged), output names, version_policy, dynamic_batching (preferred sizes,
// queue delay, priority levels, the default queue policy's timeout and size), instance_group's
// count (executors), optimization.cuda.graphs, and rankd's own keys as string `parameters` (those the model
// configuration API writes: precision, user_hoisting, tables.*, input.NAME.scope / max_length,
// batching.*, buckets.cuda_graphs). Fields and parameters rankd does not use are appended to
// `unused` (one entry each, with the line for a field rankd does not know); an invalid file or a
// value rankd cannot honour is InvalidArgument naming the field.
StatusOr<nlohmann::json> TritonTextConfigToJson(const std::string& text, std::vector<std::string>& unused);

// Triton's ModelConfig in protobuf's JSON form, as protobuf text for TritonTextConfigToJson.
// InvalidArgument naming the field for JSON that is not a ModelConfig (or holds a field the schema
// subset lacks).
StatusOr<std::string> TritonJsonConfigToText(const std::string& json_text);

}  // namespace rankd
