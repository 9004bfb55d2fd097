#include "tools/shared_memory_bodies.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "grpc_service.grpc.pb.h"
#include "tools/wire_tensor.h"

namespace rankd {
namespace {

struct OutputShape {
  std::string name;
  size_t row_bytes = 0;  // bytes of one row
};

Status RpcStatus(const grpc::Status& s, const std::string& what) {
  return s.ok() ? Status::Ok() : Unavailable(what + ": " + s.error_message());
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
               size_t offset, size_t bytes) {
  params["shared_memory_region"].set_string_param(region);
  params["shared_memory_offset"].set_int64_param(static_cast<int64_t>(offset));
  params["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(bytes));
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

StatusOr<std::unique_ptr<SharedMemoryBodies>> SharedMemoryBodies::Create(const std::string& address,
                                                                         const std::string& model,
                                                                         const std::string& version,
                                                                         const std::vector<InferRequest>& requests) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  inference::ModelMetadataRequest mq;
  mq.set_name(model);
  mq.set_version(version);
  inference::ModelMetadataResponse metadata;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    RANKD_RETURN_IF_ERROR(RpcStatus(stub->ModelMetadata(&context, mq, &metadata), "model metadata"));
  }
  std::vector<OutputShape> all;
  for (const auto& o : metadata.outputs()) {
    auto dtype = DTypeFromName(o.datatype());
    if (!dtype) return InvalidArgument("output '" + o.name() + "' has datatype " + o.datatype());
    size_t row = DTypeSize(*dtype);
    for (int k = 1; k < o.shape_size(); ++k) {
      if (o.shape(k) < 0) return InvalidArgument("output '" + o.name() + "' has no fixed size per row");
      row *= static_cast<size_t>(o.shape(k));
    }
    all.push_back({o.name(), row});
  }

  std::unique_ptr<SharedMemoryBodies> out(new SharedMemoryBodies());
  out->address_ = address;
  out->key_ = "/rankd_bench_" + std::to_string(getpid());
  out->name_ = "rankd_bench";
  // The layout: request by request, its inputs then its outputs, each 64-byte aligned.
  struct Place {
    size_t offset, bytes;
  };
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
  inference::SystemSharedMemoryRegisterRequest reg;
  reg.set_name(out->name_);
  reg.set_key(out->key_);
  reg.set_offset(0);
  reg.set_byte_size(out->bytes_);
  inference::SystemSharedMemoryRegisterResponse registered;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    RANKD_RETURN_IF_ERROR(
        RpcStatus(stub->SystemSharedMemoryRegister(&context, reg, &registered), "registering " + out->key_));
  }
  out->registered_ = true;

  for (size_t i = 0; i < requests.size(); ++i) {
    inference::ModelInferRequest p = GrpcRequestHeader(requests[i], model, version);
    for (int k = 0; k < p.inputs_size(); ++k) {
      const size_t at = static_cast<size_t>(k);
      SetRegion(*p.mutable_inputs(k)->mutable_parameters(), out->name_, inputs[i][at].offset, inputs[i][at].bytes);
    }
    for (size_t k = 0; k < chosen[i].size(); ++k) {
      auto* o = p.add_outputs();
      o->set_name(chosen[i][k]->name);
      SetRegion(*o->mutable_parameters(), out->name_, outputs[i][k].offset, outputs[i][k].bytes);
    }
    out->bodies_.push_back({p.SerializeAsString(), 0});
  }
  return out;
}

SharedMemoryBodies::~SharedMemoryBodies() {
  if (registered_) {
    auto stub =
        inference::GRPCInferenceService::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
    inference::SystemSharedMemoryUnregisterRequest q;
    q.set_name(name_);
    inference::SystemSharedMemoryUnregisterResponse r;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    stub->SystemSharedMemoryUnregister(&context, q, &r);  // best effort: the server may be gone
  }
  if (base_ != nullptr) munmap(base_, bytes_);
  shm_unlink(key_.c_str());
}

}  // namespace rankd
