// ResolveModelConfig: a model's config checked against its graph and completed from it (model/config.h).
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/graph.h"

namespace rankd {
namespace {

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

}  // namespace

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
