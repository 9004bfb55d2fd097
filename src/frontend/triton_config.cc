#include "frontend/triton_config.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace rankd {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

inference::DataType TritonType(DType dtype) {
  inference::DataType t = inference::TYPE_INVALID;
  return inference::DataType_Parse(std::string("TYPE_") + DTypeName(dtype), &t) ? t : inference::TYPE_INVALID;
}

void SetParameter(inference::ModelConfig& c, const std::string& key, const std::string& value) {
  (*c.mutable_parameters())[key].set_string_value(value);
}

nlohmann::json FieldValue(const Message& m, const Reflection& r, const FieldDescriptor& f, int index) {
  const bool repeated = f.is_repeated();
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return repeated ? r.GetRepeatedInt32(m, &f, index) : r.GetInt32(m, &f);
    case FieldDescriptor::CPPTYPE_INT64:
      return repeated ? r.GetRepeatedInt64(m, &f, index) : r.GetInt64(m, &f);
    case FieldDescriptor::CPPTYPE_UINT32:
      return repeated ? r.GetRepeatedUInt32(m, &f, index) : r.GetUInt32(m, &f);
    case FieldDescriptor::CPPTYPE_UINT64:
      return repeated ? r.GetRepeatedUInt64(m, &f, index) : r.GetUInt64(m, &f);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return repeated ? r.GetRepeatedDouble(m, &f, index) : r.GetDouble(m, &f);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return repeated ? r.GetRepeatedFloat(m, &f, index) : r.GetFloat(m, &f);
    case FieldDescriptor::CPPTYPE_BOOL:
      return repeated ? r.GetRepeatedBool(m, &f, index) : r.GetBool(m, &f);
    case FieldDescriptor::CPPTYPE_STRING:
      return repeated ? r.GetRepeatedString(m, &f, index) : r.GetString(m, &f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return (repeated ? r.GetRepeatedEnum(m, &f, index) : r.GetEnum(m, &f))->name();
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ProtoToJson(repeated ? r.GetRepeatedMessage(m, &f, index) : r.GetMessage(m, &f));
  }
  return nullptr;
}

}  // namespace

nlohmann::json ProtoToJson(const Message& message) {
  nlohmann::json out = nlohmann::json::object();
  const Reflection& r = *message.GetReflection();
  for (int i = 0; i < message.GetDescriptor()->field_count(); ++i) {
    const FieldDescriptor* f = message.GetDescriptor()->field(i);
    // Every scalar and list, at its default too (Triton's clients read fields without checking for
    // them); a message or a oneof's member only when set.
    const bool optional = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE || f->containing_oneof() != nullptr;
    if (!f->is_repeated() && optional && !r.HasField(message, f)) continue;
    if (f->is_map()) {  // entries are messages of key and value
      nlohmann::json map = nlohmann::json::object();
      for (int i = 0; i < r.FieldSize(message, f); ++i) {
        const Message& entry = r.GetRepeatedMessage(message, f, i);
        const Reflection& er = *entry.GetReflection();
        const FieldDescriptor* key = entry.GetDescriptor()->FindFieldByName("key");
        const FieldDescriptor* value = entry.GetDescriptor()->FindFieldByName("value");
        nlohmann::json k = FieldValue(entry, er, *key, -1);
        map[k.is_string() ? k.get<std::string>() : k.dump()] = FieldValue(entry, er, *value, -1);
      }
      out[f->name()] = map;
    } else if (f->is_repeated()) {
      nlohmann::json list = nlohmann::json::array();
      for (int i = 0; i < r.FieldSize(message, f); ++i) list.push_back(FieldValue(message, r, *f, i));
      out[f->name()] = list;
    } else {
      out[f->name()] = FieldValue(message, r, *f, -1);
    }
  }
  return out;
}

inference::ModelConfig TritonModelConfig(const Model& model) {
  const ModelConfig& config = model.config();
  inference::ModelConfig c;
  c.set_name(model.name());
  c.set_platform("onnxruntime_onnx");  // the model file's format, as Triton names it
  c.set_backend("rankd");
  switch (config.version_policy.kind) {
    case VersionPolicy::Kind::kLatest:
      c.mutable_version_policy()->mutable_latest()->set_num_versions(
          static_cast<uint32_t>(config.version_policy.latest));
      break;
    case VersionPolicy::Kind::kAll:
      c.mutable_version_policy()->mutable_all();
      break;
    case VersionPolicy::Kind::kSpecific:
      for (int64_t v : config.version_policy.versions) c.mutable_version_policy()->mutable_specific()->add_versions(v);
      break;
  }
  c.set_max_batch_size(static_cast<int32_t>(std::min<int64_t>(model.max_request_rows(), INT32_MAX)));
  for (const InputSignature& in : model.inputs()) {
    inference::ModelInput* t = c.add_input();
    t->set_name(in.name);
    t->set_data_type(in.strings ? inference::TYPE_STRING : TritonType(in.dtype));
    for (int64_t d : in.dims) t->add_dims(d);
    if (in.ragged) {
      t->set_allow_ragged_batch(true);
      SetParameter(c, "input." + in.name + ".max_length", std::to_string(in.max_length));
    }
    if (in.user_scope) SetParameter(c, "input." + in.name + ".scope", "user");
  }
  for (const OutputSignature& out : model.outputs()) {
    inference::ModelOutput* t = c.add_output();
    t->set_name(out.name);
    t->set_data_type(TritonType(out.dtype));
    for (int64_t d : out.dims) t->add_dims(d);
    if (out.dims.empty()) t->add_dims(1);  // a score per row: Triton's dims exclude the batch
  }
  const BatchingConfig& b = config.batching;
  if (b.enabled) {
    inference::ModelDynamicBatching* d = c.mutable_dynamic_batching();
    for (int64_t rows : b.preferred_batch_size) d->add_preferred_batch_size(static_cast<int32_t>(rows));
    d->set_max_queue_delay_microseconds(static_cast<uint64_t>(b.max_queue_delay_microseconds));
    d->set_priority_levels(static_cast<uint64_t>(b.priority_levels));
    d->set_default_priority_level(static_cast<uint64_t>(b.default_priority_level));
    d->mutable_default_queue_policy()->set_default_timeout_microseconds(
        static_cast<uint64_t>(b.default_timeout_microseconds));
    d->mutable_default_queue_policy()->set_allow_timeout_override(true);
    d->mutable_default_queue_policy()->set_max_queue_size(static_cast<uint32_t>(b.max_queue_size));
    if (b.max_batch_size > 0) SetParameter(c, "batching.max_batch_size", std::to_string(b.max_batch_size));
    if (b.max_queue_wait_microseconds > 0)
      SetParameter(c, "batching.max_queue_wait_microseconds", std::to_string(b.max_queue_wait_microseconds));
  }
  inference::ModelInstanceGroup* group = c.add_instance_group();
  const bool gpu = model.backend().device_kind() == DeviceKind::kCuda;
  group->set_name(model.name() + "_0");
  group->set_kind(gpu ? inference::ModelInstanceGroup::KIND_GPU : inference::ModelInstanceGroup::KIND_CPU);
  group->set_count(std::max(model.executors(), 1));
  if (model.executors() <= 0) SetParameter(c, "executors", "unbounded");  // the CPU: each request on its own
  if (gpu) {
    for (const ReplicaState& r : model.replicas()) group->add_gpus(r.device);  // count is per GPU, as Triton's
  }
  SetParameter(c, "precision", config.precision);
  SetParameter(c, "user_hoisting", config.user_hoisting ? "true" : "false");
  if (!gpu) SetParameter(c, "cpu_row_split", CpuRowSplitName(config.cpu_row_split));
  SetParameter(c, "tables.dtype", DTypeName(config.table_dtype));
  if (config.table_gpu_budget_mb >= 0)
    SetParameter(c, "tables.gpu_budget_mb", std::to_string(config.table_gpu_budget_mb));
  if (config.table_shard_over_gpus) SetParameter(c, "tables.shard_over_gpus", "true");
  for (const auto& [table, tier] : config.table_tiers) SetParameter(c, "tables.tiers." + table, tier);
  for (const auto& [table, rows] : config.table_cache_rows)
    SetParameter(c, "tables.cache_rows." + table, std::to_string(rows));
  if (model.shape_buckets()) SetParameter(c, "buckets.cuda_graphs", config.buckets.cuda_graphs ? "true" : "false");
  if (const RoutingConfig& r = config.routing; r.cpu != CpuRouting::kOff) {
    SetParameter(c, "routing.cpu", CpuRoutingName(r.cpu));
    if (r.cpu_max_rows > 0) SetParameter(c, "routing.cpu_max_rows", std::to_string(r.cpu_max_rows));
    SetParameter(c, "routing.cpu_runs", std::to_string(r.cpu_runs));
  }
  return c;
}

}  // namespace rankd
