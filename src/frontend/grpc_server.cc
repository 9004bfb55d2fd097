#include "frontend/grpc_server.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "grpc_service.grpc.pb.h"

#include "common/host_allocator.h"
#include "common/narrow_ids.h"

namespace rankd {
namespace {

using inference::GRPCInferenceService;
using Service = GRPCInferenceService::AsyncService;

grpc::Status ToGrpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  switch (s.code()) {
    case StatusCode::kInvalidArgument: code = grpc::StatusCode::INVALID_ARGUMENT; break;
    case StatusCode::kNotFound: code = grpc::StatusCode::NOT_FOUND; break;
    case StatusCode::kUnimplemented: code = grpc::StatusCode::UNIMPLEMENTED; break;
    case StatusCode::kUnavailable: code = grpc::StatusCode::UNAVAILABLE; break;
    case StatusCode::kDeadlineExceeded: code = grpc::StatusCode::DEADLINE_EXCEEDED; break;
    case StatusCode::kResourceExhausted: code = grpc::StatusCode::RESOURCE_EXHAUSTED; break;
    default: break;
  }
  return grpc::Status(code, s.message());
}

// Copies typed contents (their count checked by the caller) into a tensor; INT64 ids the model
// takes in 32 bits are held as INT32, each clamped (T int32_t, the field's values int64). INT8 and
// UINT8 values carried in wider fields must fit, as in JSON.
template <typename T, typename Field>
Status FillTyped(const Field& field, int64_t n, Tensor& t, const std::string& name) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, int32_t> && std::is_same_v<typename Field::value_type, int64_t>) {
      t.data<T>()[i] = NarrowId(field.Get(static_cast<int>(i)));
    } else if constexpr ((std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>) &&
                         !std::is_same_v<typename Field::value_type, bool>) {
      auto v = field.Get(static_cast<int>(i));
      if (std::cmp_less(v, std::numeric_limits<T>::min()) || std::cmp_greater(v, std::numeric_limits<T>::max())) {
        return InvalidArgument("input '" + name + "': value " + std::to_string(v) + " is out of range for its datatype");
      }
      t.data<T>()[i] = static_cast<T>(v);
    } else {
      t.data<T>()[i] = static_cast<T>(field.Get(static_cast<int>(i)));
    }
  }
  return Status::Ok();
}

// How many typed values `contents` holds for `dtype` (-1: the datatype has no typed field here).
int64_t TypedCount(const inference::InferTensorContents& c, DType dtype) {
  switch (dtype) {
    case DType::kF32: return c.fp32_contents_size();
    case DType::kF64: return c.fp64_contents_size();
    case DType::kI64: return c.int64_contents_size();
    case DType::kI32:
    case DType::kI8: return c.int_contents_size();
    case DType::kU8: return c.uint_contents_size();
    case DType::kBool: return c.bool_contents_size();
    default: return -1;
  }
}

StatusOr<InferRequest> FromProto(const inference::ModelInferRequest& p, const GrpcServerOptions& options,
                                 const Model& model) {
  RequestTensorScope request_tensors;  // pinned where a GPU reads them (common/host_allocator.h)
  InferRequest r;
  r.id = p.id();
  if (p.inputs().empty()) return InvalidArgument("the request has no inputs");
  bool raw = p.raw_input_contents_size() > 0;
  if (raw && p.raw_input_contents_size() != p.inputs_size()) {
    return InvalidArgument("raw_input_contents has " + std::to_string(p.raw_input_contents_size()) + " entries for " +
                           std::to_string(p.inputs_size()) + " inputs");
  }
  for (int i = 0; i < p.inputs_size(); ++i) {
    const auto& in = p.inputs(i);
    InferInput x;
    x.name = in.name();
    auto dtype = DTypeFromName(in.datatype());
    if (!dtype || *dtype == DType::kF16 || *dtype == DType::kBF16) {
      return InvalidArgument("input '" + in.name() + "': datatype '" + in.datatype() + "' is not supported");
    }
    Shape shape(in.shape().begin(), in.shape().end());
    if (shape.empty()) return InvalidArgument("input '" + in.name() + "': shape must have a batch dimension");
    int64_t n = 1;
    for (int64_t d : shape) {
      if (d < 0) return InvalidArgument("input '" + in.name() + "': shape entries must be non-negative");
      if (d != 0 && n > options.max_elements / d) return ResourceExhausted("input '" + in.name() + "': shape is too large");
      n *= d;
    }
    auto lengths = in.parameters().find("lengths");
    if (lengths != in.parameters().end()) {
      const std::string& text = lengths->second.string_param();
      size_t pos = 0;
      while (pos < text.size()) {
        size_t comma = text.find(',', pos);
        std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (item.empty() || item.size() > 12 || item.find_first_not_of("0123456789") != std::string::npos) {
          return InvalidArgument("input '" + in.name() + "': lengths must be a comma-separated list of counts");
        }
        x.lengths.push_back(std::stoll(item));
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
      if (shape.size() != 1) return InvalidArgument("input '" + in.name() + "': with lengths, shape must be [number of values]");
    }
    // The values present are checked against the declared shape before anything is allocated.
    if (raw) {
      size_t need = static_cast<size_t>(n) * DTypeSize(*dtype);
      if (p.raw_input_contents(i).size() != need) {
        return InvalidArgument("input '" + in.name() + "': raw contents hold " +
                               std::to_string(p.raw_input_contents(i).size()) + " bytes, shape " +
                               ShapeToString(shape) + " of " + DTypeName(*dtype) + " needs " + std::to_string(need));
      }
    } else if (int64_t have = TypedCount(in.contents(), *dtype); have != n) {
      return InvalidArgument("input '" + in.name() + "': its shape needs " + std::to_string(n) +
                             " values, contents has " + std::to_string(have));
    }
    // INT64 ids the model takes in 32 bits are held so from here on (InferInput::ids_in_32_bits).
    x.ids_in_32_bits = *dtype == DType::kI64 && model.TakesIdsIn32Bits(x.name);
    x.data = Tensor::Empty(x.ids_in_32_bits ? DType::kI32 : *dtype, shape);
    if (raw) {
      const std::string& bytes = p.raw_input_contents(i);
      if (x.ids_in_32_bits) {
        NarrowIdBytes(bytes.data(), x.data.data<int32_t>(), static_cast<size_t>(n));
      } else if (!bytes.empty()) {
        std::memcpy(x.data.raw(), bytes.data(), bytes.size());
      }
    } else if (x.ids_in_32_bits) {
      RETURN_IF_ERROR(FillTyped<int32_t>(in.contents().int64_contents(), n, x.data, x.name));
    } else {
      const auto& c = in.contents();
      switch (*dtype) {
        case DType::kF32: RETURN_IF_ERROR(FillTyped<float>(c.fp32_contents(), n, x.data, x.name)); break;
        case DType::kF64: RETURN_IF_ERROR(FillTyped<double>(c.fp64_contents(), n, x.data, x.name)); break;
        case DType::kI64: RETURN_IF_ERROR(FillTyped<int64_t>(c.int64_contents(), n, x.data, x.name)); break;
        case DType::kI32: RETURN_IF_ERROR(FillTyped<int32_t>(c.int_contents(), n, x.data, x.name)); break;
        case DType::kI8: RETURN_IF_ERROR(FillTyped<int8_t>(c.int_contents(), n, x.data, x.name)); break;
        case DType::kU8: RETURN_IF_ERROR(FillTyped<uint8_t>(c.uint_contents(), n, x.data, x.name)); break;
        case DType::kBool: RETURN_IF_ERROR(FillTyped<uint8_t>(c.bool_contents(), n, x.data, x.name)); break;
        default: return InvalidArgument("input '" + in.name() + "': unsupported datatype");
      }
    }
    if (!x.lengths.empty()) SumLengths(x);  // while they are in cache: no model passes over them again
    r.inputs.push_back(std::move(x));
  }
  for (const auto& o : p.outputs()) r.outputs.push_back(o.name());
  for (const auto& [key, value] : p.parameters()) {
    if (key != "priority" && key != "timeout") continue;
    if (value.parameter_choice_case() != inference::InferParameter::kInt64Param || value.int64_param() < 0 ||
        value.int64_param() > (key == "priority" ? 1000000 : int64_t{1} << 40)) {
      return InvalidArgument("parameter '" + key + "' must be a non-negative int64");
    }
    if (key == "priority") r.priority = static_cast<int>(value.int64_param());
    else r.timeout_us = value.int64_param();
  }
  return r;
}

class CallBase {
 public:
  virtual ~CallBase() = default;
  virtual void Proceed(bool ok) = 0;
};

// One pending or running unary call of an RPC. Accepting a call re-arms the RPC with a new Call.
template <typename Req, typename Resp>
class Call final : public CallBase {
 public:
  using Arm = std::function<void(grpc::ServerContext*, Req*, grpc::ServerAsyncResponseWriter<Resp>*, void*)>;
  using Handler = std::function<grpc::Status(const Req&, Resp&)>;

  static void Start(Arm arm, Handler handler) { new Call(std::move(arm), std::move(handler)); }

  void Proceed(bool ok) override {
    if (finishing_ || !ok) {  // finished, or the server is shutting down
      delete this;
      return;
    }
    Start(arm_, handler_);
    grpc::Status status;
    try {  // a bug in one call's path fails that call, not the process
      status = handler_(request_, response_);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "grpc: a call failed: %s\n", e.what());
      status = grpc::Status(grpc::StatusCode::INTERNAL, std::string("internal error: ") + e.what());
    } catch (...) {
      std::fprintf(stderr, "grpc: a call failed\n");
      status = grpc::Status(grpc::StatusCode::INTERNAL, "internal error");
    }
    finishing_ = true;
    responder_.Finish(response_, status, this);
  }

 private:
  Call(Arm arm, Handler handler) : arm_(std::move(arm)), handler_(std::move(handler)), responder_(&context_) {
    arm_(&context_, &request_, &responder_, this);
  }

  Arm arm_;
  Handler handler_;
  grpc::ServerContext context_;
  Req request_;
  Resp response_;
  grpc::ServerAsyncResponseWriter<Resp> responder_;
  bool finishing_ = false;
};

}  // namespace

class GrpcServer::Impl {
 public:
  Impl(const GrpcServerOptions& options, InferService& service, std::function<bool()> ready)
      : options_(options), infer_(service), ready_(std::move(ready)) {}

  Status Start() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.address + ":" + std::to_string(options_.port), grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&service_);
    // Another process on the same port is an error, not a second server sharing its traffic.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, options_.reuse_port ? 1 : 0);
    // gRPC takes an int: larger limits are its largest.
    int max_message = static_cast<int>(std::min<int64_t>(options_.max_message_bytes, INT32_MAX));
    builder.SetMaxReceiveMessageSize(max_message);
    builder.SetMaxSendMessageSize(max_message);
    int threads = options_.threads > 0 ? options_.threads : static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
    for (int i = 0; i < threads; ++i) queues_.push_back(builder.AddCompletionQueue());
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0) {
      return Unavailable("cannot listen for gRPC on " + options_.address + ":" + std::to_string(options_.port));
    }
    for (auto& cq : queues_) {
      Arm(cq.get());
      threads_.emplace_back([q = cq.get()] {
        void* tag;
        bool ok;
        while (q->Next(&tag, &ok)) static_cast<CallBase*>(tag)->Proceed(ok);
      });
    }
    return Status::Ok();
  }

  void Stop(std::chrono::milliseconds drain) {
    if (stopped_ || !server_) return;
    stopped_ = true;
    server_->Shutdown(std::chrono::system_clock::now() + drain);
    for (auto& cq : queues_) cq->Shutdown();
    for (auto& t : threads_) t.join();
  }

  ~Impl() { Stop(std::chrono::milliseconds(0)); }
  int port() const { return port_; }

 private:
  // Registers one pending call of every RPC on `cq`.
  void Arm(grpc::ServerCompletionQueue* cq) {
    using namespace inference;
    Service* s = &service_;
#define RANKD_GRPC_ARM(RPC, HANDLER)                                                                       \
  Call<RPC##Request, RPC##Response>::Start(                                                               \
      [s, cq](grpc::ServerContext* ctx, RPC##Request* req, grpc::ServerAsyncResponseWriter<RPC##Response>* w, \
              void* tag) { s->Request##RPC(ctx, req, w, cq, cq, tag); },                                  \
      [this](const RPC##Request& req, RPC##Response& resp) { return HANDLER(req, resp); })
    RANKD_GRPC_ARM(ServerLive, ServerLive);
    RANKD_GRPC_ARM(ServerReady, ServerReady);
    RANKD_GRPC_ARM(ModelReady, ModelReady);
    RANKD_GRPC_ARM(ServerMetadata, ServerMetadata);
    RANKD_GRPC_ARM(ModelMetadata, ModelMetadata);
    RANKD_GRPC_ARM(ModelInfer, ModelInfer);
    RANKD_GRPC_ARM(RepositoryIndex, RepositoryIndex);
    RANKD_GRPC_ARM(RepositoryModelLoad, RepositoryModelLoad);
    RANKD_GRPC_ARM(RepositoryModelUnload, RepositoryModelUnload);
#undef RANKD_GRPC_ARM
  }

  grpc::Status ServerLive(const inference::ServerLiveRequest&, inference::ServerLiveResponse& r) {
    r.set_live(true);
    return grpc::Status::OK;
  }
  grpc::Status ServerReady(const inference::ServerReadyRequest&, inference::ServerReadyResponse& r) {
    r.set_ready(ready_());
    return grpc::Status::OK;
  }
  grpc::Status ModelReady(const inference::ModelReadyRequest& q, inference::ModelReadyResponse& r) {
    auto v = ParseModelVersion(q.version());
    if (!v.ok()) return ToGrpc(v.status());
    auto model = infer_.repository().Get(q.name(), *v);
    if (model.status().code() == StatusCode::kNotFound) return ToGrpc(model.status());
    r.set_ready(model.ok());
    return grpc::Status::OK;
  }
  grpc::Status ServerMetadata(const inference::ServerMetadataRequest&, inference::ServerMetadataResponse& r) {
    r.set_name("rankd");
    r.set_version("0.1.0");
    r.add_extensions("model_repository");
    return grpc::Status::OK;
  }
  grpc::Status ModelMetadata(const inference::ModelMetadataRequest& q, inference::ModelMetadataResponse& r) {
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
      t->set_datatype(DTypeName(in.dtype));
      t->add_shape(-1);
      for (int64_t d : in.dims) t->add_shape(d);
    }
    for (const OutputSignature& out : (*model)->outputs()) {
      auto* t = r.add_outputs();
      t->set_name(out.name);
      t->set_datatype(DTypeName(out.dtype));
      t->add_shape(-1);
      t->add_shape(-1);
    }
    return grpc::Status::OK;
  }
  grpc::Status ModelInfer(const inference::ModelInferRequest& q, inference::ModelInferResponse& r) {
    auto received = InferService::Clock::now();
    auto v = ParseModelVersion(q.model_version());
    if (!v.ok()) return ToGrpc(v.status());
    Status s = infer_.Infer(
        q.model_name(), *v, received, [&](const Model& model) { return FromProto(q, options_, model); },
        [&](const Model& model, const InferRequest& req, const std::vector<InferOutput>& outputs) {
          r.set_model_name(model.name());
          r.set_model_version(std::to_string(model.version()));
          r.set_id(req.id);
          for (const InferOutput& o : outputs) {
            auto* t = r.add_outputs();
            t->set_name(o.name);
            t->set_datatype(DTypeName(o.data.dtype()));
            for (int64_t d : o.data.shape()) t->add_shape(d);
            r.add_raw_output_contents(static_cast<const char*>(o.data.raw()), o.data.bytes());
          }
        });
    return ToGrpc(s);
  }
  grpc::Status RepositoryIndex(const inference::RepositoryIndexRequest& q, inference::RepositoryIndexResponse& r) {
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
  grpc::Status RepositoryModelLoad(const inference::RepositoryModelLoadRequest& q, inference::RepositoryModelLoadResponse&) {
    return ToGrpc(infer_.repository().Load(q.model_name()));
  }
  grpc::Status RepositoryModelUnload(const inference::RepositoryModelUnloadRequest& q,
                                     inference::RepositoryModelUnloadResponse&) {
    return ToGrpc(infer_.repository().Unload(q.model_name()));
  }

  GrpcServerOptions options_;
  InferService& infer_;
  std::function<bool()> ready_;
  Service service_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  std::vector<std::thread> threads_;
  int port_ = 0;
  bool stopped_ = false;
};

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcServer::~GrpcServer() = default;
int GrpcServer::port() const { return impl_->port(); }
void GrpcServer::Stop(std::chrono::milliseconds drain) { impl_->Stop(drain); }

StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const GrpcServerOptions& options, InferService& service,
                                                        std::function<bool()> ready) {
  auto impl = std::make_unique<Impl>(options, service, std::move(ready));
  RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(impl)));
}

}  // namespace rankd
