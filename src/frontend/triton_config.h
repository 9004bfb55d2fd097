// A model's configuration in Triton's schema (model_config.proto), for the model configuration
// API: GET /v2/models/NAME[/versions/V]/config and gRPC ModelConfig (docs/serving.md). Triton's
// clients and tools (perf_analyzer, Model Analyzer, tritonclient's examples) read it at start.
#pragma once

#include <nlohmann/json.hpp>

#include "model_config.pb.h"
#include "serving/model.h"

namespace rankd {

// What rankd's config and the loaded model say, in Triton's fields: inputs and outputs with their
// TYPE_* and per-row dims (-1 for a ragged list, which allows ragged batches), max_batch_size (the
// rows one request may carry), dynamic_batching from the batching section, instance_group from the
// backend's device and executors, version_policy; rankd's own keys (precision, input scopes and
// ragged lengths, table placement, shape buckets) as `parameters`, each a string.
inference::ModelConfig TritonModelConfig(const Model& model);

// The JSON Triton's HTTP endpoints answer with: the message's fields by their proto names, enums by
// name, integers of every width as JSON numbers (protobuf's own JSON writes 64-bit ones as strings,
// which Triton converts back); scalars and lists at their defaults too, a message field or a oneof's
// member only when set.
nlohmann::json ProtoToJson(const google::protobuf::Message& message);

}  // namespace rankd
