// HttpApi: the KServe v2 REST protocol (and Triton's model repository extension) over a
// ModelRepository. One Handle call per HTTP request, answered through a callback; thread-safe.
//
//   GET  /v2/health/live, /v2/health/ready, /v2
//   GET  /v2/models/NAME[/versions/V][/ready | /config | /stats], /v2/models/stats
//   POST /v2/models/NAME[/versions/V]/infer        JSON, or the binary tensor data extension
//   POST /v2/repository/index
//   POST /v2/repository/models/NAME/load | /unload
//   GET, POST /v2/logging
//   GET  /v2/systemsharedmemory[/region/NAME]/status
//   POST /v2/systemsharedmemory/region/NAME/register, /v2/systemsharedmemory[/region/NAME]/unregister
//
// Errors are {"error": "..."} with the status Triton uses for the code: 400 invalid argument or
// unsupported, 404 not found, 503 unavailable, 500 internal; 403 for a restricted API called
// without its header.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "frontend/health_probes.h"
#include "frontend/http_server.h"
#include "frontend/kserve_json.h"
#include "frontend/restricted_apis.h"
#include "frontend/shared_memory_regions.h"
#include "serving/infer_service.h"
#include "serving/repository.h"

namespace rankd {

// A request target's path segments (what lies between its slashes, before any '?'): views into the
// target, held inline up to eight.
using PathSegments = boost::container::small_vector<std::string_view, 8>;

class HttpApi {
 public:
  // `probes` answer /v2/health/live and /v2/health/ready (the latter also fails once shutting down).
  // Inputs and outputs in system shared memory use `shared_memory`'s regions (registered through
  // this API or another frontend's).
  // Calls of the categories `restricted` names need its header (restricted_apis.h).
  // An inference request that waited longer than `max_queue_wait` for a worker to take it (from
  // its last byte read to Handle) is refused unread with 503, counted as an overload refusal; zero:
  // never.
  HttpApi(InferService& service, JsonLimits limits, HealthProbes probes, SharedMemoryRegions& shared_memory,
          RestrictedApis restricted = {}, std::chrono::microseconds max_queue_wait = {})
      : service_(service),
        repository_(service.repository()),
        limits_(limits),
        probes_(std::move(probes)),
        shared_memory_(shared_memory),
        restricted_(std::move(restricted)),
        max_queue_wait_(max_queue_wait) {}

  // Answers through `respond`: at once, or for an inference once it has run (on the model's
  // batcher thread when it batches). A body with Content-Encoding gzip or deflate is inflated
  // first, and the answer compressed when Accept-Encoding asks (http_compression.h).
  void Handle(const HttpRequest& request, HttpRespond respond);
  // Whether the HTTP server may call Handle with `request` on the I/O thread that read it
  // (HttpServerOptions::handle_at_once): an uncompressed inference of at most kAtOnceBodyBytes
  // for a model that batches (parsed there and queued to the batcher, never run there), or one
  // answered at once with an error. A W2 request read there costs no worker's wake-up.
  bool HandlesAtOnce(const HttpRequest& request) const;
  static constexpr size_t kAtOnceBodyBytes = 64 * 1024;
  // After this, /v2/health/ready answers 503 (the server is shutting down).
  void SetShuttingDown() { shutting_down_ = true; }

 private:
  void Route(const HttpRequest& request, HttpRespond respond);
  void Infer(const HttpRequest& request, std::string_view model, int64_t version, HttpRespond respond);
  // Every route but inference; `path` is the target's segments.
  HttpResponse Answer(const HttpRequest& request, const PathSegments& path);
  HttpResponse ModelMetadata(const std::string& model, int64_t version);
  // Every served version's statistics (`model` empty), or those of `model` (frontend/triton_stats.h).
  HttpResponse Statistics(const std::string& model, int64_t version);
  // The logging extension: GET or POST /v2/logging.
  HttpResponse Logging(const HttpRequest& request);
  // The trace extension: GET or POST /v2[/models/NAME]/trace/setting (`model` empty: global).
  HttpResponse TraceSetting(const HttpRequest& request, const std::string& model);
  // The system shared memory extension's routes (`path` starts v2/systemsharedmemory).
  HttpResponse SharedMemory(const HttpRequest& request, const PathSegments& path);

  InferService& service_;
  ModelRepository& repository_;
  JsonLimits limits_;
  HealthProbes probes_;
  SharedMemoryRegions& shared_memory_;
  RestrictedApis restricted_;
  const std::chrono::microseconds max_queue_wait_;
  std::atomic<bool> shutting_down_{false};
};

// A body in the binary tensor data extension: its first Inference-Header-Content-Length bytes
// are the JSON header, the rest the tensors; without the header, all of it is JSON. `binary`
// views the request's bytes: the request must outlive it.
struct BinaryBody {
  std::string_view json;
  BinaryPieces binary;
};
StatusOr<BinaryBody> SplitBinaryBody(const HttpRequest& request);

// Triton's HTTP status for a Status code.
int HttpStatusFor(StatusCode code);

}  // namespace rankd
