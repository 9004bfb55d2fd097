#include "tools/shared_memory_bodies.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "grpc_service.grpc.pb.h"
#include "tools/http_call.h"
#include "tools/wire_tensor.h"

namespace rankd {
namespace {

using nlohmann::json;

struct OutputShape {
  std::string name;
  size_t row_bytes = 0;  // bytes of one row
};

// Where a tensor lies in the region.
struct Place {
  size_t offset = 0, bytes = 0;
};

Status RpcStatus(const grpc::Status& s, const std::string& what) {
  return s.ok() ? Status::Ok() : Unavailable(what + ": " + s.error_message());
}

Status HttpStatus(const StatusOr<HttpAnswer>& a, const std::string& what) {
  if (!a.ok()) return a.status();
  if (a->status == 200) return Status::Ok();
  return Unavailable(what + ": HTTP " + std::to_string(a->status) + " " + a->body);
}

std::unique_ptr<inference::GRPCInferenceService::Stub> GrpcStub(const SharedMemoryBodies::Server& s) {
  return inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(s.host + ":" + std::to_string(s.port), grpc::InsecureChannelCredentials()));
}

std::unique_ptr<grpc::ClientContext> WithDeadline(int seconds) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return context;
}

std::string ModelPath(const SharedMemoryBodies::Server& s) {
  return "/v2/models/" + s.model + (s.version.empty() ? "" : "/versions/" + s.version);
}

// One output's bytes a row, from its datatype's name and its shape past the rows.
StatusOr<OutputShape> OutputOf(const std::string& name, const std::string& datatype,
                               const std::vector<int64_t>& shape) {
  auto dtype = DTypeFromName(datatype);
  if (!dtype) return InvalidArgument("output '" + name + "' has datatype " + datatype);
  size_t row = DTypeSize(*dtype);
  for (size_t k = 1; k < shape.size(); ++k) {
    if (shape[k] < 0) return InvalidArgument("output '" + name + "' has no fixed size per row");
    row *= static_cast<size_t>(shape[k]);
  }
  return OutputShape{name, row};
}

// The model's outputs, from its metadata.
StatusOr<std::vector<OutputShape>> ModelOutputs(const SharedMemoryBodies::Server& s) {
  std::vector<OutputShape> all;
  if (s.protocol == "grpc") {
    inference::ModelMetadataRequest q;
    q.set_name(s.model);
    q.set_version(s.version);
    inference::ModelMetadataResponse metadata;
    RANKD_RETURN_IF_ERROR(
        RpcStatus(GrpcStub(s)->ModelMetadata(WithDeadline(10).get(), q, &metadata), "model metadata"));
    for (const auto& o : metadata.outputs()) {
      RANKD_ASSIGN_OR_RETURN(OutputShape shape, OutputOf(o.name(), o.datatype(),
                                                         std::vector<int64_t>(o.shape().begin(), o.shape().end())));
      all.push_back(std::move(shape));
    }
    return all;
  }
  auto answer = HttpCall(s.host, s.port, "GET", ModelPath(s), "");
  RANKD_RETURN_IF_ERROR(HttpStatus(answer, "model metadata"));
  json metadata = json::parse(answer->body, nullptr, /*allow_exceptions=*/false);
  if (!metadata.is_object() || !metadata.contains("outputs") || !metadata["outputs"].is_array()) {
    return Unavailable("model metadata: no outputs in " + answer->body);
  }
  for (const json& o : metadata["outputs"]) {
    if (!o.is_object() || !o.contains("name") || !o["name"].is_string() || !o.contains("datatype") ||
        !o["datatype"].is_string() || !o.contains("shape") || !o["shape"].is_array() ||
        !std::all_of(o["shape"].begin(), o["shape"].end(), [](const json& d) { return d.is_number_integer(); })) {
      return Unavailable("model metadata: an output without a name, datatype or shape in " + answer->body);
    }
    RANKD_ASSIGN_OR_RETURN(OutputShape shape, OutputOf(o["name"].get<std::string>(), o["datatype"].get<std::string>(),
                                                       o["shape"].get<std::vector<int64_t>>()));
    all.push_back(std::move(shape));
  }
  return all;
}

Status Register(const SharedMemoryBodies::Server& s, const std::string& name, const std::string& key, size_t bytes) {
  const std::string what = "registering " + key;
  if (s.protocol == "grpc") {
    inference::SystemSharedMemoryRegisterRequest q;
    q.set_name(name);
    q.set_key(key);
    q.set_offset(0);
    q.set_byte_size(bytes);
    inference::SystemSharedMemoryRegisterResponse r;
    return RpcStatus(GrpcStub(s)->SystemSharedMemoryRegister(WithDeadline(10).get(), q, &r), what);
  }
  json body = {{"key", key}, {"offset", 0}, {"byte_size", bytes}};
  return HttpStatus(
      HttpCall(s.host, s.port, "POST", "/v2/systemsharedmemory/region/" + name + "/register", body.dump()), what);
}

// Best effort: the server may be gone.
void Unregister(const SharedMemoryBodies::Server& s, const std::string& name) {
  if (s.protocol == "grpc") {
    inference::SystemSharedMemoryUnregisterRequest q;
    q.set_name(name);
    inference::SystemSharedMemoryUnregisterResponse r;
    GrpcStub(s)->SystemSharedMemoryUnregister(WithDeadline(5).get(), q, &r);
    return;
  }
  (void)HttpCall(s.host, s.port, "POST", "/v2/systemsharedmemory/region/" + name + "/unregister", "", 5);
}

// Rows scored by `r`: the first dimension of its per-candidate inputs (user-scope inputs have one
// row, ragged ones sent flat have the values' count), so the largest one without lengths.
int64_t RowsOf(const InferRequest& r) {
  int64_t rows = 0;
  for (const InferInput& x : r.inputs) {
    const Shape& shape = x.is_bytes() ? x.strings.shape : x.data.shape();
    if (x.lengths.empty() && !shape.empty()) rows = std::max(rows, shape[0]);
  }
  return rows;
}

void SetRegion(google::protobuf::Map<std::string, inference::InferParameter>& params, const std::string& region,
               const Place& at) {
  params["shared_memory_region"].set_string_param(region);
  params["shared_memory_offset"].set_int64_param(static_cast<int64_t>(at.offset));
  params["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(at.bytes));
}

json RegionParameters(const std::string& region, const Place& at) {
  return {{"shared_memory_region", region}, {"shared_memory_offset", at.offset}, {"shared_memory_byte_size", at.bytes}};
}

// Request `r` naming its tensors' places: a ModelInferRequest for gRPC, a KServe JSON body for HTTP.
// `wire` holds r's inputs as ToWire gave them (their datatypes and shapes).
std::string Body(const SharedMemoryBodies::Server& s, const InferRequest& r, const std::vector<WireTensor>& wire,
                 const std::string& region, const std::vector<Place>& inputs,
                 const std::vector<const OutputShape*>& outputs, const std::vector<Place>& output_places) {
  if (s.protocol == "grpc") {
    inference::ModelInferRequest p = GrpcRequestHeader(r, s.model, s.version);
    for (int k = 0; k < p.inputs_size(); ++k) {
      SetRegion(*p.mutable_inputs(k)->mutable_parameters(), region, inputs[static_cast<size_t>(k)]);
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      auto* o = p.add_outputs();
      o->set_name(outputs[k]->name);
      SetRegion(*o->mutable_parameters(), region, output_places[k]);
    }
    return p.SerializeAsString();
  }
  json body = {{"id", r.id}, {"inputs", json::array()}, {"outputs", json::array()}};
  for (size_t k = 0; k < r.inputs.size(); ++k) {
    json in = {{"name", r.inputs[k].name},
               {"datatype", wire[k].datatype},
               {"shape", wire[k].shape},
               {"parameters", RegionParameters(region, inputs[k])}};
    if (!r.inputs[k].lengths.empty()) in["parameters"]["lengths"] = r.inputs[k].lengths;
    body["inputs"].push_back(std::move(in));
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    body["outputs"].push_back({{"name", outputs[k]->name}, {"parameters", RegionParameters(region, output_places[k])}});
  }
  return body.dump();
}

size_t Aligned(size_t n) { return (n + 63) / 64 * 64; }

}  // namespace

inference::ModelInferRequest GrpcRequestHeader(const InferRequest& r, const std::string& model,
                                               const std::string& version) {
  inference::ModelInferRequest p;
  p.set_model_name(model);
  p.set_model_version(version);
  p.set_id(r.id);
  for (const InferInput& x : r.inputs) {
    auto* in = p.add_inputs();
    in->set_name(x.name);
    in->set_datatype(x.is_bytes() ? "BYTES" : DTypeName(x.data.dtype()));
    for (int64_t d : x.is_bytes() ? x.strings.shape : x.data.shape()) in->add_shape(d);
    if (!x.lengths.empty()) {
      std::string lengths;
      for (int64_t n : x.lengths) lengths += (lengths.empty() ? "" : ",") + std::to_string(n);
      (*in->mutable_parameters())["lengths"].set_string_param(lengths);
    }
  }
  return p;
}

StatusOr<std::unique_ptr<SharedMemoryBodies>> SharedMemoryBodies::Create(const Server& server,
                                                                         const std::vector<InferRequest>& requests) {
  RANKD_ASSIGN_OR_RETURN(std::vector<OutputShape> all, ModelOutputs(server));
  std::unique_ptr<SharedMemoryBodies> out(new SharedMemoryBodies());
  out->server_ = server;
  out->key_ = "/rankd_bench_" + std::to_string(getpid());
  out->name_ = "rankd_bench";
  // The layout: request by request, its inputs then its outputs, each 64-byte aligned.
  std::vector<std::vector<Place>> inputs(requests.size()), outputs(requests.size());
  std::vector<std::vector<WireTensor>> wire(requests.size());
  std::vector<std::vector<const OutputShape*>> chosen(requests.size());
  size_t at = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    for (const InferInput& x : requests[i].inputs) {
      wire[i].push_back(ToWire(x));
      inputs[i].push_back({at, wire[i].back().bytes.size()});
      at += Aligned(inputs[i].back().bytes);
    }
    const int64_t rows = RowsOf(requests[i]);
    for (const OutputShape& o : all) {
      const auto& asked = requests[i].outputs;
      if (!asked.empty() && std::find(asked.begin(), asked.end(), o.name) == asked.end()) continue;
      chosen[i].push_back(&o);
      outputs[i].push_back({at, static_cast<size_t>(rows) * o.row_bytes});
      at += Aligned(outputs[i].back().bytes);
    }
  }
  out->bytes_ = std::max<size_t>(at, 64);
  shm_unlink(out->key_.c_str());  // a previous run's, killed before it cleaned up
  int fd = shm_open(out->key_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return Unavailable("shm_open " + out->key_ + ": " + std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(out->bytes_)) != 0) {
    close(fd);
    shm_unlink(out->key_.c_str());
    return Unavailable("cannot size " + out->key_ + ": " + std::strerror(errno));
  }
  void* base = mmap(nullptr, out->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(out->key_.c_str());
    return Unavailable("cannot map " + out->key_ + ": " + std::strerror(errno));
  }
  out->base_ = base;
  for (size_t i = 0; i < requests.size(); ++i) {
    for (size_t k = 0; k < wire[i].size(); ++k) {
      const std::string& bytes = wire[i][k].bytes;
      if (!bytes.empty()) std::memcpy(static_cast<char*>(base) + inputs[i][k].offset, bytes.data(), bytes.size());
    }
  }
  RANKD_RETURN_IF_ERROR(Register(server, out->name_, out->key_, out->bytes_));
  out->registered_ = true;
  for (size_t i = 0; i < requests.size(); ++i) {
    out->bodies_.push_back({Body(server, requests[i], wire[i], out->name_, inputs[i], chosen[i], outputs[i]), 0});
  }
  return out;
}

SharedMemoryBodies::~SharedMemoryBodies() {
  if (registered_) Unregister(server_, name_);
  if (base_ != nullptr) munmap(base_, bytes_);
  shm_unlink(key_.c_str());
}

}  // namespace rankd
