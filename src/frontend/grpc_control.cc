#include "frontend/grpc_control.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "frontend/log_settings.h"
#include "frontend/triton_config.h"
#include "frontend/triton_stats.h"
#include "serving/model.h"
#include "serving/repository.h"
#include "serving/request_tracer.h"

namespace rankd {

grpc::Status ToGrpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case StatusCode::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case StatusCode::kUnimplemented:
      code = grpc::StatusCode::UNIMPLEMENTED;
      break;
    case StatusCode::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case StatusCode::kDeadlineExceeded:
      code = grpc::StatusCode::DEADLINE_EXCEEDED;
      break;
    case StatusCode::kResourceExhausted:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
    default:
      break;
  }
  return grpc::Status(code, s.message());
}

grpc::Status GrpcControl::ServerLive(const inference::ServerLiveRequest&, inference::ServerLiveResponse& r) {
  r.set_live(probes_.live().ok());
  return grpc::Status::OK;
}

grpc::Status GrpcControl::ServerReady(const inference::ServerReadyRequest&, inference::ServerReadyResponse& r) {
  r.set_ready(probes_.ready().ok());
  return grpc::Status::OK;
}

grpc::Status GrpcControl::ModelReady(const inference::ModelReadyRequest& q, inference::ModelReadyResponse& r) {
  auto v = ParseModelVersion(q.version());
  if (!v.ok()) return ToGrpc(v.status());
  auto model = infer_.repository().Get(q.name(), *v);
  if (model.status().code() == StatusCode::kNotFound) return ToGrpc(model.status());
  r.set_ready(model.ok() && (*model)->CheckServable().ok());
  return grpc::Status::OK;
}

grpc::Status GrpcControl::ServerMetadata(const inference::ServerMetadataRequest&,
                                         inference::ServerMetadataResponse& r) {
  r.set_name("rankd");
  r.set_version("0.1.0");
  r.add_extensions("model_repository");
  r.add_extensions("model_configuration");
  r.add_extensions("statistics");
  r.add_extensions("system_shared_memory");
  r.add_extensions("cuda_shared_memory");
  r.add_extensions("trace");
  r.add_extensions("logging");
  return grpc::Status::OK;
}

grpc::Status GrpcControl::ModelStatistics(const inference::ModelStatisticsRequest& q,
                                          inference::ModelStatisticsResponse& r) {
  auto v = ParseModelVersion(q.version());
  if (!v.ok()) return ToGrpc(v.status());
  auto stats = TritonStatistics(infer_.repository(), infer_.metrics(), q.name(), *v);
  if (!stats.ok()) return ToGrpc(stats.status());
  r = std::move(*stats);
  return grpc::Status::OK;
}

grpc::Status GrpcControl::ModelConfig(const inference::ModelConfigRequest& q, inference::ModelConfigResponse& r) {
  auto v = ParseModelVersion(q.version());
  if (!v.ok()) return ToGrpc(v.status());
  auto model = infer_.repository().Get(q.name(), *v);
  if (!model.ok()) return ToGrpc(model.status());
  *r.mutable_config() = TritonModelConfig(**model);
  return grpc::Status::OK;
}

grpc::Status GrpcControl::ModelMetadata(const inference::ModelMetadataRequest& q, inference::ModelMetadataResponse& r) {
  auto v = ParseModelVersion(q.version());
  if (!v.ok()) return ToGrpc(v.status());
  auto model = infer_.repository().Get(q.name(), *v);
  if (!model.ok()) return ToGrpc(model.status());
  r.set_name(q.name());
  r.add_versions(std::to_string((*model)->version()));
  r.set_platform("onnx");
  for (const InputSignature& in : (*model)->inputs()) {
    auto* t = r.add_inputs();
    t->set_name(in.name);
    t->set_datatype(in.datatype());
    t->add_shape(-1);
    for (int64_t d : in.dims) t->add_shape(d);
  }
  for (const OutputSignature& out : (*model)->outputs()) {
    auto* t = r.add_outputs();
    t->set_name(out.name);
    t->set_datatype(DTypeName(out.dtype));
    t->add_shape(-1);
    for (int64_t d : out.dims) t->add_shape(d);
  }
  return grpc::Status::OK;
}

grpc::Status GrpcControl::SystemSharedMemoryStatus(const inference::SystemSharedMemoryStatusRequest& q,
                                                   inference::SystemSharedMemoryStatusResponse& r) {
  auto regions = shared_memory_.List(SharedMemoryRegions::Kind::kSystem, q.name());
  if (!regions.ok()) return ToGrpc(regions.status());
  for (const SharedMemoryRegions::RegionStatus& region : *regions) {
    auto& out = (*r.mutable_regions())[region.name];
    out.set_name(region.name);
    out.set_key(region.key);
    out.set_offset(region.offset);
    out.set_byte_size(region.byte_size);
  }
  return grpc::Status::OK;
}

grpc::Status GrpcControl::SystemSharedMemoryRegister(const inference::SystemSharedMemoryRegisterRequest& q,
                                                     inference::SystemSharedMemoryRegisterResponse&) {
  return ToGrpc(shared_memory_.Register(q.name(), q.key(), q.offset(), q.byte_size()));
}

grpc::Status GrpcControl::SystemSharedMemoryUnregister(const inference::SystemSharedMemoryUnregisterRequest& q,
                                                       inference::SystemSharedMemoryUnregisterResponse&) {
  return ToGrpc(shared_memory_.Unregister(SharedMemoryRegions::Kind::kSystem, q.name()));
}

grpc::Status GrpcControl::CudaSharedMemoryStatus(const inference::CudaSharedMemoryStatusRequest& q,
                                                 inference::CudaSharedMemoryStatusResponse& r) {
  auto regions = shared_memory_.List(SharedMemoryRegions::Kind::kCuda, q.name());
  if (!regions.ok()) return ToGrpc(regions.status());
  for (const SharedMemoryRegions::RegionStatus& region : *regions) {
    auto& out = (*r.mutable_regions())[region.name];
    out.set_name(region.name);
    out.set_device_id(static_cast<uint64_t>(region.device_id));
    out.set_byte_size(region.byte_size);
  }
  return grpc::Status::OK;
}

grpc::Status GrpcControl::CudaSharedMemoryRegister(const inference::CudaSharedMemoryRegisterRequest& q,
                                                   inference::CudaSharedMemoryRegisterResponse&) {
  return ToGrpc(shared_memory_.RegisterCuda(q.name(), q.raw_handle(), q.device_id(), q.byte_size()));
}

grpc::Status GrpcControl::CudaSharedMemoryUnregister(const inference::CudaSharedMemoryUnregisterRequest& q,
                                                     inference::CudaSharedMemoryUnregisterResponse&) {
  return ToGrpc(shared_memory_.Unregister(SharedMemoryRegions::Kind::kCuda, q.name()));
}

grpc::Status GrpcControl::TraceSetting(const inference::TraceSettingRequest& q, inference::TraceSettingResponse& r) {
  RequestTracer* tracer = infer_.tracer();
  if (!tracer) return ToGrpc(Unimplemented("tracing is not served here"));
  if (!q.model_name().empty()) {
    if (Status known = infer_.repository().Get(q.model_name(), -1).status(); !known.ok()) return ToGrpc(known);
  }
  RequestTracer::Update update;
  for (const auto& [name, value] : q.settings()) {
    if (value.value().empty()) {
      update[name] = std::nullopt;
    } else {
      update[name] = std::vector<std::string>(value.value().begin(), value.value().end());
    }
  }
  if (Status s = tracer->Apply(q.model_name(), update); !s.ok()) return ToGrpc(s);
  for (const auto& [name, values] : tracer->Current(q.model_name())) {
    auto& out = (*r.mutable_settings())[name];
    for (const std::string& v : values) out.add_value(v);
  }
  return grpc::Status::OK;
}

grpc::Status GrpcControl::LogSettings(const inference::LogSettingsRequest& q, inference::LogSettingsResponse& r) {
  rankd::LogSettings settings = CurrentLogSettings();
  for (const auto& [key, v] : q.settings()) {
    LogSettingValue value;
    switch (v.parameter_choice_case()) {
      case inference::LogSettingsRequest::SettingValue::kBoolParam:
        value = v.bool_param();
        break;
      case inference::LogSettingsRequest::SettingValue::kUint32Param:
        value = int64_t{v.uint32_param()};
        break;
      case inference::LogSettingsRequest::SettingValue::kStringParam:
        value = v.string_param();
        break;
      default:
        return ToGrpc(InvalidArgument("log setting '" + key + "' has no value"));
    }
    if (Status s = SetLogSetting(settings, key, value); !s.ok()) return ToGrpc(s);
  }
  if (Status s = ApplyLogSettings(settings); !s.ok()) return ToGrpc(s);
  for (const auto& [key, value] : LogSettingValues(settings)) {
    auto& out = (*r.mutable_settings())[key];
    if (const auto* b = std::get_if<bool>(&value)) out.set_bool_param(*b);
    if (const auto* n = std::get_if<int64_t>(&value)) out.set_uint32_param(static_cast<uint32_t>(*n));
    if (const auto* t = std::get_if<std::string>(&value)) out.set_string_param(*t);
  }
  return grpc::Status::OK;
}

grpc::Status GrpcControl::RepositoryIndex(const inference::RepositoryIndexRequest& q,
                                          inference::RepositoryIndexResponse& r) {
  for (const RepositoryIndexEntry& e : infer_.repository().Index()) {
    if (q.ready() && e.state != "READY") continue;
    auto* m = r.add_models();
    m->set_name(e.name);
    if (e.version >= 0) m->set_version(std::to_string(e.version));
    m->set_state(e.state);
    m->set_reason(e.reason);
  }
  return grpc::Status::OK;
}

grpc::Status GrpcControl::RepositoryModelLoad(const inference::RepositoryModelLoadRequest& q,
                                              inference::RepositoryModelLoadResponse&) {
  std::string config;
  for (const auto& [key, value] : q.parameters()) {
    if (key != "config") {  // "file:..." overrides (model files sent with the call) are not supported
      return ToGrpc(Unimplemented("load parameter '" + key + "' is not supported (only 'config')"));
    }
    if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kStringParam)
      return ToGrpc(InvalidArgument("load parameter 'config' must be a string (Triton's model configuration as JSON)"));
    config = value.string_param();
  }
  return ToGrpc(infer_.repository().Load(q.model_name(), config));
}

grpc::Status GrpcControl::RepositoryModelUnload(const inference::RepositoryModelUnloadRequest& q,
                                                inference::RepositoryModelUnloadResponse&) {
  return ToGrpc(infer_.repository().Unload(q.model_name()));
}

}  // namespace rankd
