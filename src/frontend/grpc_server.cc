#include "frontend/grpc_server.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/mutex.h"
#include "common/thread_name.h"
#include "common/usable_cores.h"
#include "frontend/call_queue.h"
#include "frontend/grpc_control.h"
#include "frontend/grpc_infer.h"
#include "frontend/grpc_mutexes.h"
#include "grpc_service.grpc.pb.h"

namespace rankd {
namespace {

using inference::GRPCInferenceService;
// ModelInfer's messages arrive as bytes (a raw method), read by the thread that handles the call:
// a call refused for overload is never parsed (CallQueue).
using Service = GRPCInferenceService::WithRawMethod_ModelInfer<GRPCInferenceService::AsyncService>;

// The access log's line for a call: the peer, the method, the status code and the time taken.
void LogCall(const std::string& peer, const std::string& method, const grpc::Status& status,
             std::chrono::steady_clock::time_point started) {
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started).count();
  LogAccess("grpc " + peer + " " + method + " " + std::to_string(static_cast<int>(status.error_code())) + " " +
            std::to_string(us) + "us");
}

class CallBase {
 public:
  virtual ~CallBase() = default;
  virtual void Proceed(bool ok) = 0;
};

// A pending call of any method no service registers (gRPC's generic service), answered
// UNIMPLEMENTED naming the method (gRPC's own answer has an empty message). Accepting one re-arms.
class UnknownMethodCall final : public CallBase {
 public:
  static void Start(grpc::AsyncGenericService* service, grpc::ServerCompletionQueue* cq) {
    new UnknownMethodCall(service, cq);
  }

  void Proceed(bool ok) override {
    if (answered_ || !ok) {  // sent, or the server is shutting down
      delete this;
      return;
    }
    Start(service_, cq_);
    answered_ = true;
    grpc::Status unimplemented(
        grpc::StatusCode::UNIMPLEMENTED,
        "rankd does not implement " + context_.method() + " (docs/serving.md lists the gRPC methods it serves)");
    if (LogAccessOn()) LogCall(context_.peer(), context_.method(), unimplemented, std::chrono::steady_clock::now());
    stream_.Finish(unimplemented, this);
  }

 private:
  UnknownMethodCall(grpc::AsyncGenericService* service, grpc::ServerCompletionQueue* cq)
      : service_(service), cq_(cq), stream_(&context_) {
    service_->RequestCall(&context_, &stream_, cq_, cq_, this);
  }

  grpc::AsyncGenericService* service_;
  grpc::ServerCompletionQueue* cq_;
  grpc::GenericServerContext context_;
  grpc::GenericServerAsyncReaderWriter stream_;
  bool answered_ = false;  // only the completion queue's thread touches it
};

// One pending or running unary call of an RPC. Accepting a call re-arms the RPC with a new Call.
// The handler answers through `respond`, at once or later from another thread (an inference
// completes on its model's batcher thread); the call is deleted when gRPC has sent the answer.
template <typename Req, typename Resp>
class Call final : public CallBase {
 public:
  using Arm = std::function<void(grpc::ServerContext*, Req*, grpc::ServerAsyncResponseWriter<Resp>*, void*)>;
  using Respond = std::function<void(const grpc::Status&)>;
  using Handler = std::function<void(grpc::ServerContext&, const Req&, Resp&, Respond)>;

  static void Start(const char* method, Arm arm, Handler handler) {
    new Call(method, std::move(arm), std::move(handler));
  }

  void Proceed(bool ok) override {
    if (answered_.load() || !ok) {  // sent, or the server is shutting down
      delete this;
      return;
    }
    Start(method_, arm_, handler_);
    started_ = std::chrono::steady_clock::now();
    try {  // a bug in one call's path fails that call, not the process
      handler_(context_, request_, response_, [this](const grpc::Status& status) { Answer(status); });
    } catch (const std::exception& e) {
      // Handlers answer once and throw nothing after answering (InferService guards its steps),
      // so the call is still ours here.
      LogError(std::string("grpc: a call failed: ") + e.what());
      Answer(grpc::Status(grpc::StatusCode::INTERNAL, std::string("internal error: ") + e.what()));
    } catch (...) {
      LogError("grpc: a call failed");
      Answer(grpc::Status(grpc::StatusCode::INTERNAL, "internal error"));
    }
  }

 private:
  Call(const char* method, Arm arm, Handler handler)
      : method_(method), arm_(std::move(arm)), handler_(std::move(handler)), responder_(&context_) {
    arm_(&context_, &request_, &responder_, this);
  }

  void Answer(const grpc::Status& status) {
    if (answered_.exchange(true)) return;
    if (LogAccessOn()) LogCall(context_.peer(), method_, status, started_);
    responder_.Finish(response_, status, this);
  }

  const char* method_;
  std::chrono::steady_clock::time_point started_;
  Arm arm_;
  Handler handler_;
  grpc::ServerContext context_;
  Req request_;
  Resp response_;
  grpc::ServerAsyncResponseWriter<Resp> responder_;
  std::atomic<bool> answered_{false};
};

}  // namespace

class GrpcServer::Impl {
 public:
  Impl(const GrpcServerOptions& options, InferService& service, HealthProbes probes, SharedMemoryRegions& shared_memory)
      : options_(options), infer_(service), probes_(std::move(probes)), shared_memory_(shared_memory) {}

  // Plain, or TLS from the options' PEM files (an unreadable or empty file is an error naming it).
  StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials() const {
    if (!options_.ssl) return grpc::InsecureServerCredentials();
    auto read = [](const std::string& flag, const std::string& path) -> StatusOr<std::string> {
      std::ifstream in(path, std::ios::binary);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) return InvalidArgument(flag + ": cannot read '" + path + "'");
      if (text.empty()) return InvalidArgument(flag + ": '" + path + "' is missing or empty");
      return text;
    };
    grpc::SslServerCredentialsOptions ssl(options_.ssl_mutual
                                              ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                              : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    RANKD_ASSIGN_OR_RETURN(std::string cert, read("--grpc-server-cert", options_.ssl_cert));
    RANKD_ASSIGN_OR_RETURN(std::string key, read("--grpc-server-key", options_.ssl_key));
    ssl.pem_key_cert_pairs.push_back({key, cert});
    if (options_.ssl_mutual || !options_.ssl_root_cert.empty()) {
      RANKD_ASSIGN_OR_RETURN(ssl.pem_root_certs, read("--grpc-root-cert", options_.ssl_root_cert));
    }
    return grpc::SslServerCredentials(ssl);
  }

  Status Start() {
    // grpc.health.v1.Health (Kubernetes' gRPC probes, Envoy): gRPC's own service, kept at the
    // server's readiness by WatchReadiness.
    grpc::EnableDefaultHealthCheckService(true);
    TurnOffMutexDeadlockDetection();  // before gRPC's threads take their locks (grpc_mutexes.h)
    RANKD_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials, Credentials());
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.address + ":" + std::to_string(options_.port), credentials, &port_);
    builder.RegisterService(&service_);
    builder.RegisterAsyncGenericService(&unknown_methods_);
    // Another process on the same port is an error, not a second server sharing its traffic.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, options_.reuse_port ? 1 : 0);
    // gRPC takes an int: larger limits are its largest.
    int max_message = static_cast<int>(std::min<int64_t>(options_.max_message_bytes, INT32_MAX));
    builder.SetMaxReceiveMessageSize(max_message);
    builder.SetMaxSendMessageSize(max_message);
    for (const auto& [name, value] : options_.channel_args) builder.AddChannelArgument(name, value);
    // One per core the process may run on (a server pinned to 8 of 16 cores: 8, not 16).
    int threads = options_.threads > 0 ? options_.threads : std::max(2, UsableCores());
    for (int i = 0; i < threads; ++i) queues_.push_back(builder.AddCompletionQueue());
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0) {
      return Unavailable("cannot listen for gRPC on " + options_.address + ":" + std::to_string(options_.port));
    }
    CallQueueOptions calls;
    calls.workers = threads;
    calls.capacity = static_cast<size_t>(std::max(1, options_.max_queued_calls));
    calls.max_wait = options_.max_queue_wait;
    calls_ = std::make_unique<CallQueue>(calls);
    for (auto& cq : queues_) {
      Arm(cq.get());
      UnknownMethodCall::Start(&unknown_methods_, cq.get());
      threads_.emplace_back([q = cq.get()] {
        NameThisThread("rankd-grpc");
        void* tag;
        bool ok;
        while (q->Next(&tag, &ok)) static_cast<CallBase*>(tag)->Proceed(ok);
      });
    }
    if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
      health->SetServingStatus("inference.GRPCInferenceService", probes_.ready().ok());  // named as well as ""
      health->SetServingStatus(probes_.ready().ok());
      health_thread_ = std::thread([this, health] {
        NameThisThread("rankd-health");
        WatchReadiness(health);
      });
    }
    return Status::Ok();
  }

  void Stop(std::chrono::milliseconds drain) {
    Drain(drain);
    if (closed_ || !server_) return;
    closed_ = true;
    // What still waits is handled and later calls refused; answers go out through the queues, still open.
    // The queue outlives the threads that submit to it.
    calls_->Close();
    for (auto& cq : queues_) cq->Shutdown();
    for (auto& t : threads_) t.join();
  }

  void Drain(std::chrono::milliseconds drain) {
    if (stopped_.exchange(true) || !server_) return;
    if (health_thread_.joinable()) {
      {
        MutexLock lock(health_mu_);
        health_stop_ = true;
      }
      health_changed_.notify_all();
      health_thread_.join();
      server_->GetHealthCheckService()->Shutdown();  // NOT_SERVING from now on, whatever is set later
    }
    // Past the deadline gRPC cancels the calls still open, and returns once each has been answered.
    server_->Shutdown(std::chrono::system_clock::now() + drain);
  }

  ~Impl() { Stop(std::chrono::milliseconds(0)); }
  int port() const { return port_; }

 private:
  // Sets the health service's status (every service name, "" included) to the server's readiness
  // whenever it changes, checked every kHealthPeriod, until Stop.
  void WatchReadiness(grpc::HealthCheckServiceInterface* health) {
    bool serving = probes_.ready().ok();
    MutexLock lock(health_mu_);
    while (!health_stop_) {
      health_changed_.wait_for(lock.native(), kHealthPeriod);
      if (health_stop_) break;
      lock.Unlock();
      const bool ready = probes_.ready().ok();
      if (ready != serving) health->SetServingStatus(ready);
      serving = ready;
      lock.Lock();
    }
  }

  // Registers one pending call of every RPC on `cq`. ModelInfer answers when its request has run;
  // the others answer at once.
  void Arm(grpc::ServerCompletionQueue* cq) {
    using namespace inference;
    Service* s = &service_;
#define RANKD_GRPC_ARM(RPC, HANDLE)                                                                           \
  Call<RPC##Request, RPC##Response>::Start(                                                                   \
      #RPC,                                                                                                   \
      [s, cq](grpc::ServerContext* ctx, RPC##Request* req, grpc::ServerAsyncResponseWriter<RPC##Response>* w, \
              void* tag) { s->Request##RPC(ctx, req, w, cq, cq, tag); },                                      \
      [this](grpc::ServerContext& ctx, const RPC##Request& req, RPC##Response& resp,                          \
             Call<RPC##Request, RPC##Response>::Respond respond) { HANDLE; })
#define RANKD_GRPC_NOW(RPC, CATEGORY)                                                            \
  RANKD_GRPC_ARM(                                                                                \
      RPC, if (auto refusal = Refusal(ctx, ApiCategory::CATEGORY)) { respond(*refusal); } else { \
        respond(control_.RPC(req, resp));                                                        \
      })
    RANKD_GRPC_NOW(ServerLive, kHealth);
    RANKD_GRPC_NOW(ServerReady, kHealth);
    RANKD_GRPC_NOW(ModelReady, kHealth);
    RANKD_GRPC_NOW(ServerMetadata, kMetadata);
    RANKD_GRPC_NOW(ModelMetadata, kMetadata);
    RANKD_GRPC_NOW(ModelConfig, kModelConfig);
    RANKD_GRPC_NOW(ModelStatistics, kStatistics);
    using RawCall = Call<grpc::ByteBuffer, grpc::ByteBuffer>;
    RawCall::Start(
        "ModelInfer",
        [s, cq](grpc::ServerContext* ctx, grpc::ByteBuffer* req, grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>* w,
                void* tag) { s->RequestModelInfer(ctx, req, w, cq, cq, tag); },
        [this](grpc::ServerContext& ctx, const grpc::ByteBuffer& req, grpc::ByteBuffer& resp,
               RawCall::Respond respond) {
          if (auto refusal = Refusal(ctx, ApiCategory::kInference)) return respond(*refusal);
          auto refuse = [this, respond](const std::string& why) {
            infer_.metrics().RecordOverloadRefusal();
            respond(grpc::Status(grpc::StatusCode::UNAVAILABLE, why));
          };
          if (inference_.HandlesAtOnce(req)) {
            return inference_.Infer(ctx, req, resp, std::move(respond), /*run_here_when_idle=*/false);
          }
          calls_->Submit(
              [this, &ctx, &req, &resp, respond](std::chrono::microseconds) {
                inference_.Infer(ctx, req, resp, respond, /*run_here_when_idle=*/true);
              },
              std::move(refuse));
        });
    RANKD_GRPC_NOW(RepositoryIndex, kModelRepository);
    RANKD_GRPC_NOW(RepositoryModelLoad, kModelRepository);
    RANKD_GRPC_NOW(RepositoryModelUnload, kModelRepository);
    RANKD_GRPC_NOW(SystemSharedMemoryStatus, kSharedMemory);
    RANKD_GRPC_NOW(SystemSharedMemoryRegister, kSharedMemory);
    RANKD_GRPC_NOW(SystemSharedMemoryUnregister, kSharedMemory);
    RANKD_GRPC_NOW(CudaSharedMemoryStatus, kSharedMemory);
    RANKD_GRPC_NOW(CudaSharedMemoryRegister, kSharedMemory);
    RANKD_GRPC_NOW(CudaSharedMemoryUnregister, kSharedMemory);
    RANKD_GRPC_NOW(LogSettings, kLogging);
    RANKD_GRPC_NOW(TraceSetting, kTrace);
#undef RANKD_GRPC_NOW
#undef RANKD_GRPC_ARM
  }

  // UNAVAILABLE when a call of `category` lacks the metadata entry its restriction asks for.
  std::optional<grpc::Status> Refusal(const grpc::ServerContext& ctx, ApiCategory category) const {
    auto refusal = options_.restricted.Refusal(category, [&](const std::string& key) -> std::optional<std::string> {
      const auto& metadata = ctx.client_metadata();
      auto it = metadata.find(grpc::string_ref(key));
      if (it == metadata.end()) return std::nullopt;
      return std::string(it->second.data(), it->second.size());
    });
    if (!refusal) return std::nullopt;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, *refusal);
  }

  GrpcServerOptions options_;
  InferService& infer_;
  HealthProbes probes_;
  SharedMemoryRegions& shared_memory_;
  GrpcControl control_{infer_, probes_, shared_memory_};                // the calls answered at once
  GrpcInfer inference_{infer_, shared_memory_, options_.max_elements};  // ModelInfer
  Service service_;
  grpc::AsyncGenericService unknown_methods_;  // every method no service registers
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  std::vector<std::thread> threads_;
  std::unique_ptr<CallQueue> calls_;  // ModelInfer calls between being taken and being handled
  int port_ = 0;
  std::atomic<bool> stopped_{false};  // Drain began
  bool closed_ = false;               // Stop joined the threads
  // The health service's updates (WatchReadiness).
  static constexpr std::chrono::milliseconds kHealthPeriod{200};
  std::thread health_thread_;
  Mutex health_mu_;
  std::condition_variable health_changed_;
  bool health_stop_ RANKD_GUARDED_BY(health_mu_) = false;
};

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcServer::~GrpcServer() = default;
int GrpcServer::port() const { return impl_->port(); }
void GrpcServer::Drain(std::chrono::milliseconds drain) { impl_->Drain(drain); }

void GrpcServer::Stop(std::chrono::milliseconds drain) { impl_->Stop(drain); }

StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const GrpcServerOptions& options, InferService& service,
                                                        HealthProbes probes, SharedMemoryRegions& shared_memory) {
  auto impl = std::make_unique<Impl>(options, service, std::move(probes), shared_memory);
  RANKD_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(impl)));
}

StatusOr<std::pair<std::string, int>> ParseGrpcChannelArg(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == 0 || eq == std::string::npos) return InvalidArgument("'" + text + "' is not NAME=INTEGER");
  const std::string value = text.substr(eq + 1);
  int v = 0;
  auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || error != std::errc() || end != value.data() + value.size()) {
    return InvalidArgument("'" + text + "': the value must be an integer that fits in 32 bits");
  }
  return std::pair<std::string, int>(text.substr(0, eq), v);
}

}  // namespace rankd
