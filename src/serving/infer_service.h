// InferService: one inference request as every frontend serves it: resolve the model version,
// parse the request (timed as compute input), score it, serialise the answer (timed as compute
// output), and record the request's metrics. Frontends supply the parse and serialise steps of
// their wire format and are called back with the outcome: no thread waits for a request. Parsing
// runs on the caller's thread; scoring, serialising and the callback run on the model's batcher
// thread when the model batches, else on the caller's thread too. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/parsed_request.h"
#include "serving/metrics.h"
#include "serving/repository.h"
#include "serving/request_tracer.h"

namespace rankd {

class InferService {
 public:
  using Clock = std::chrono::steady_clock;
  using Parse = std::function<StatusOr<ParsedRequest>(const Model&)>;
  using Serialize = std::function<void(const Model&, const InferRequest&, const std::vector<InferOutput>&)>;
  // The request's outcome: OK once serialised, else why it failed. Called exactly once.
  using Finish = std::function<void(const Status&)>;

  // `tracer`, when given, samples requests to trace (Triton's trace extension).
  InferService(ModelRepository& repository, Metrics& metrics, RequestTracer* tracer = nullptr)
      : repository_(repository), metrics_(metrics), tracer_(tracer) {}

  // `received`: when the frontend finished reading the request (the queue time starts there).
  // `parse` runs before InferAsync returns; `serialize` and `finish` may run later, on another
  // thread, and are kept until then. Anything `parse` or `serialize` throws fails the request
  // (INTERNAL, logged), not the process. `run_here_when_idle` (Model::InferAsync): false on a
  // thread that must not run the model (an event loop), which then only parses and queues.
  void InferAsync(std::string_view model, int64_t version, Clock::time_point received, const Parse& parse,
                  Serialize serialize, Finish finish, bool run_here_when_idle = true);

  ModelRepository& repository() { return repository_; }
  Metrics& metrics() { return metrics_; }
  RequestTracer* tracer() { return tracer_; }

 private:
  ModelRepository& repository_;
  Metrics& metrics_;
  RequestTracer* tracer_;
};

}  // namespace rankd
