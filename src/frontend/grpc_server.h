// GrpcServer: KServe v2 `inference.GRPCInferenceService` (proto/grpc_service.proto) on gRPC's
// asynchronous API: one completion queue and thread per core, each with a pending call of every
// RPC. Inference calls go through a CallQueue (frontend/call_queue.h): the thread that takes one
// handles it at once when nothing waits, else a worker does, and under overload calls are refused
// unread once too many wait or one has waited too long. Requests carry tensors in the typed
// `contents` fields or in `raw_input_contents`; outputs are returned in `raw_output_contents`, as
// Triton does. Ragged inputs: flat values with shape [total] and the parameter "lengths" =
// "3,0,2" (a string, one length per row).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "frontend/health_probes.h"
#include "frontend/kserve_json.h"
#include "frontend/restricted_apis.h"
#include "frontend/shared_memory_regions.h"
#include "rankd/status.h"
#include "serving/infer_service.h"

namespace rankd {

struct GrpcServerOptions {
  std::string address = "0.0.0.0";
  int port = 8001;                                // 0 picks a free port
  int threads = 0;                                // 0: the number of cores
  int64_t max_message_bytes = int64_t{64} << 20;  // above 2 GiB - 1, gRPC's largest
  bool reuse_port = false;                        // SO_REUSEPORT: let other processes listen on the same port
  int64_t max_elements = int64_t{1} << 26;        // per input
  // ModelInfer calls taken off the network wait for a thread at most this long and this many at
  // once; past either they are refused unread with UNAVAILABLE (frontend/call_queue.h).
  std::chrono::milliseconds max_queue_wait{20};
  int max_queued_calls = 1024;
  // Calls of the categories it names need its metadata entry (restricted_apis.h).
  RestrictedApis restricted;
  // TLS (Triton's --grpc-use-ssl): the server's PEM certificate chain and key files; with
  // `ssl_mutual`, clients must present a certificate that `ssl_root_cert` (PEM file) signs.
  bool ssl = false;
  bool ssl_mutual = false;
  std::string ssl_cert, ssl_key, ssl_root_cert;
  // gRPC core channel arguments set on the server after rankd's own (which they override): name
  // and integer value, e.g. {"grpc.http2.max_frame_size", 1 << 20}.
  std::vector<std::pair<std::string, int>> channel_args;
};

// "NAME=INTEGER" (a channel argument as `rankd serve --grpc-channel-arg` takes it), or
// InvalidArgument naming what is wrong.
StatusOr<std::pair<std::string, int>> ParseGrpcChannelArg(const std::string& text);

class GrpcServer {
 public:
  // `probes` answer ServerLive and ServerReady; inputs and outputs in system shared memory use
  // `shared_memory`'s regions (registered through this server or another frontend).
  static StatusOr<std::unique_ptr<GrpcServer>> Start(const GrpcServerOptions& options, InferService& service,
                                                     HealthProbes probes, SharedMemoryRegions& shared_memory);
  ~GrpcServer();
  int port() const;
  // Stops accepting calls and lets calls in progress finish (up to `drain`, then cancels them);
  // returns once every call taken has been answered, which may be after the deadline.
  void Drain(std::chrono::milliseconds drain);
  // Drain (where not done yet), then joins the threads.
  void Stop(std::chrono::milliseconds drain);

  class Impl;

 private:
  explicit GrpcServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rankd
