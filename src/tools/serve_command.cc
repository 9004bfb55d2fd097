// `rankd serve`: the server. KServe v2 over HTTP on --http-port, Prometheus metrics on
// --metrics-port, models from --model-repository; SIGTERM/SIGINT drain and exit 0.
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <future>
#include <thread>

#include "common/log.h"
#include "common/usable_cores.h"
#include "frontend/grpc_server.h"
#include "frontend/http_api.h"
#include "frontend/http_server.h"
#include "runtime/backends.h"
#include "serving/metrics.h"
#include "serving/repository.h"
#include "tools/commands.h"

namespace rankd {

int ServeCommand(const ServeArgs& args) {
  if (Status s = ApplyLogSettings(args.log); !s.ok()) {
    std::fprintf(stderr, "rankd serve: %s\n", s.ToString().c_str());
    return 2;
  }
  RequestTracer tracer;  // Triton's trace extension; written out when the server stops
  if (Status s = tracer.ApplyFlags(args.trace_config); !s.ok()) {
    std::fprintf(stderr, "rankd serve: %s\n", s.ToString().c_str());
    return 2;
  }
  RestrictedApis http_restricted, grpc_restricted;  // checked before anything loads
  for (const auto& [specs, apis] :
       {std::pair{&args.http_restricted, &http_restricted}, std::pair{&args.grpc_restricted, &grpc_restricted}}) {
    for (const std::string& spec : *specs) {
      if (Status s = apis->Add(spec); !s.ok()) {
        std::fprintf(stderr, "rankd serve: %s\n", s.ToString().c_str());
        return 2;
      }
    }
  }
  // Block the stop signals in every thread; the main thread waits for them with sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  RepositoryOptions repo_options;
  repo_options.root = args.model_repository;
  repo_options.mode = args.control_mode == "poll"       ? ModelControlMode::kPoll
                      : args.control_mode == "explicit" ? ModelControlMode::kExplicit
                                                        : ModelControlMode::kNone;
  repo_options.startup_models = args.load_models;
  repo_options.model_options.max_rows = args.max_rows;
  auto backend = OpenBackend(args.device);
  if (!backend.ok()) {
    std::fprintf(stderr, "rankd serve: %s\n", backend.status().ToString().c_str());
    return 2;
  }
  repo_options.model_options.backend = *backend;
  repo_options.model_options.gpus = GpusFlag(args.device);
  // The devices the server's models run on by default: live while one of them can run work.
  auto devices = FindReplicaBackends(**backend, repo_options.model_options.gpus);
  if (!devices.ok()) {
    std::fprintf(stderr, "rankd serve: --gpus: %s\n", devices.status().ToString().c_str());
    return 2;
  }
  repo_options.model_options.executors = args.executors;
  Metrics metrics;
  repo_options.on_load_failure = [&metrics](const std::string& model, int64_t version, const Status& why) {
    LogError("model " + model + " version " + std::to_string(version) + " failed to load: " + why.ToString());
    metrics.RecordLoadFailure(model);
  };
  std::string where = (*backend)->name();
  if ((*backend)->device_kind() == DeviceKind::kCuda) {
    where += devices->size() > 1 ? ", models replicated on GPUs " : " on GPU ";
    for (size_t i = 0; i < devices->size(); ++i) where += (i ? "," : "") + std::to_string((*devices)[i]->device());
  }
  LogInfo("backend: " + where);
  auto repository = ModelRepository::Create(repo_options);
  if (!repository.ok()) {
    std::fprintf(stderr, "rankd serve: %s\n", repository.status().ToString().c_str());
    return 2;
  }
  for (const RepositoryIndexEntry& e : (*repository)->Index()) {
    LogInfo("model " + e.name + " version " + std::to_string(e.version) + " " + e.state + " " + e.reason);
  }
  JsonLimits limits;
  limits.max_body_bytes = static_cast<uint64_t>(args.max_body_mb) << 20;
  InferService service(**repository, metrics, &tracer);
  std::atomic<bool> draining{false};
  HealthProbes probes;
  probes.live = [devices = *devices]() -> Status { return AnyHealthy(devices); };
  probes.ready = [&, live = probes.live]() -> Status {
    // A failed GPU leaves the server ready while every model it should serve runs on the CPU
    // instead (routing.cpu, docs/routing.md); liveness still fails, for a restart.
    if (Status device = live(); !device.ok() && !(*repository)->Ready()) return device;
    if (draining) return Unavailable("the server is shutting down");
    if (args.strict_readiness && !(*repository)->Ready()) return Unavailable("a model is not ready");
    return Status::Ok();
  };
  SharedMemoryRegions shared_memory;  // regions clients register, over HTTP or gRPC
  if ((*backend)->device_kind() == DeviceKind::kCuda) {
    shared_memory.SetPinning(*backend, static_cast<uint64_t>(args.shared_memory_pin_limit_mb) << 20);
  }
  HttpApi api(service, limits, probes, shared_memory, http_restricted,
              std::chrono::milliseconds(args.http_max_queue_ms));

  std::unique_ptr<GrpcServer> grpc;
  if (args.grpc_port >= 0) {
    GrpcServerOptions grpc_options;
    grpc_options.address = args.http_address;
    grpc_options.port = args.grpc_port;
    // By default one per core the server may run on for each GPU it serves on: a call runs on its
    // thread while its GPU scores it, and on two H200s 16 threads on 16 cores let W2 collapse at
    // 30,000 requests/s where 32 held it (docs/replicas.md); on one GPU, more threads than cores
    // were worse (docs/log/benchmarks.md).
    grpc_options.threads = args.grpc_threads > 0
                               ? args.grpc_threads
                               : std::max(2, UsableCores()) * static_cast<int>(std::max<size_t>(1, devices->size()));
    grpc_options.max_queue_wait = std::chrono::milliseconds(args.grpc_max_queue_ms);
    grpc_options.max_queued_calls = args.max_inflight;
    for (const std::string& arg : args.grpc_channel_args) {
      auto parsed = ParseGrpcChannelArg(arg);
      if (!parsed.ok()) {
        std::fprintf(stderr, "rankd serve: --grpc-channel-arg: %s\n", parsed.status().ToString().c_str());
        return 2;
      }
      grpc_options.channel_args.push_back(*parsed);
    }
    grpc_options.max_message_bytes = static_cast<int64_t>(args.max_body_mb) << 20;
    grpc_options.restricted = grpc_restricted;
    grpc_options.ssl = args.grpc_ssl || args.grpc_ssl_mutual;
    grpc_options.ssl_mutual = args.grpc_ssl_mutual;
    grpc_options.ssl_cert = args.grpc_server_cert;
    grpc_options.ssl_key = args.grpc_server_key;
    grpc_options.ssl_root_cert = args.grpc_root_cert;
    auto started = GrpcServer::Start(grpc_options, service, probes, shared_memory);
    if (!started.ok()) {
      std::fprintf(stderr, "rankd serve: %s\n", started.status().ToString().c_str());
      return 2;
    }
    grpc = std::move(*started);
  }
  HttpServerOptions metrics_options;
  metrics_options.address = args.http_address;
  metrics_options.port = args.metrics_port;
  metrics_options.worker_threads = 1;
  metrics_options.io_threads = 1;
  const ModelRepository& models = **repository;
  auto metrics_server =
      HttpServer::Start(metrics_options, [&metrics, &models](const HttpRequest& r, HttpRespond respond) {
        HttpResponse out;
        if (r.method != "GET" || r.target.substr(0, r.target.find('?')) != "/metrics") {
          out.status = 404;
          out.body = "{\"error\":\"metrics are at GET /metrics\"}";
        } else {
          out.content_type = "text/plain; version=0.0.4";
          out.body = metrics.Text() + TableMetricsText(models) + ReplicaMetricsText(models) + RouteMetricsText(models);
        }
        respond(std::move(out));
      });
  if (!metrics_server.ok()) {
    std::fprintf(stderr, "rankd serve: %s\n", metrics_server.status().ToString().c_str());
    return 2;
  }
  // HTTP listens last: its /v2/health/live answering means gRPC and metrics are listening too.
  HttpServerOptions http_options;
  http_options.address = args.http_address;
  http_options.port = args.http_port;
  http_options.max_body_bytes = limits.max_body_bytes;
  http_options.max_inflight = args.max_inflight;
  http_options.worker_threads = args.http_threads;
  http_options.io_threads = args.http_io_threads;
  http_options.max_connections = args.http_max_connections;
  http_options.header_timeout = std::chrono::seconds(args.http_header_timeout_secs);
  http_options.handle_at_once = [&api](const HttpRequest& r) { return api.HandlesAtOnce(r); };
  if (args.http_ssl) {
    if (args.http_server_cert.empty() || args.http_server_key.empty()) {
      std::fprintf(stderr, "rankd serve: --http-use-ssl needs --http-server-cert and --http-server-key\n");
      return 2;
    }
    http_options.tls = HttpServerOptions::Tls{args.http_server_cert, args.http_server_key};
  }
  auto http = HttpServer::Start(
      http_options, [&api](const HttpRequest& r, HttpRespond respond) { api.Handle(r, std::move(respond)); });
  if (!http.ok()) {
    std::fprintf(stderr, "rankd serve: %s\n", http.status().ToString().c_str());
    return 2;
  }
  LogInfo("serving HTTP on " + args.http_address + ":" + std::to_string((*http)->port()) + ", gRPC on " +
          args.http_address + ":" + std::to_string(grpc ? grpc->port() : -1) + ", metrics on " + args.http_address +
          ":" + std::to_string((*metrics_server)->port()));

  std::atomic<bool> stopping{false};
  std::thread poller;
  if (repo_options.mode == ModelControlMode::kPoll) {
    poller = std::thread([&] {
      auto next = std::chrono::steady_clock::now() + std::chrono::seconds(args.poll_secs);
      while (!stopping) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (std::chrono::steady_clock::now() < next) continue;
        (*repository)->Poll();
        next = std::chrono::steady_clock::now() + std::chrono::seconds(args.poll_secs);
      }
    });
  }
  int signal = 0;
  sigwait(&stop_signals, &signal);
  LogInfo("signal " + std::to_string(signal) + ": draining (up to " + std::to_string(args.exit_timeout_secs) + " s)");
  api.SetShuttingDown();
  draining = true;
  stopping = true;
  if (poller.joinable()) poller.join();
  // The frontends take no more requests and those in flight finish, until the exit timeout. Then
  // the requests still queued are answered UNAVAILABLE and the batches running finish, while the
  // frontends can still answer: a frontend goes only when nothing it handed in is left to answer.
  const auto timeout = std::chrono::seconds(args.exit_timeout_secs);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::future<void> grpc_drained;
  if (grpc) grpc_drained = std::async(std::launch::async, [&] { grpc->Drain(timeout); });
  (*http)->Drain(timeout);
  if (grpc) grpc_drained.wait_until(deadline);  // gRPC's drain outlasts it while calls are queued
  (*repository)->Close(Unavailable("the server is shutting down"));
  if (grpc) {
    grpc_drained.get();
    grpc->Stop(std::chrono::milliseconds(0));
  }
  (*http)->Stop(std::chrono::milliseconds(0));
  (*metrics_server)->Stop(std::chrono::milliseconds(100));
  LogInfo("stopped");
  return 0;
}

}  // namespace rankd
