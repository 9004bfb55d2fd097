// RequestTracer: Triton's trace extension (GET/POST /v2[/models/NAME]/trace/setting, gRPC
// TraceSetting) at its TIMESTAMPS and TENSORS levels. Every `trace_rate`-th request of a model is
// traced while `trace_count` lasts (-1: no limit); a trace is the request's identity, then its
// phases' times (TIMESTAMPS) and its tensors (TENSORS), in Triton's JSON trace form:
//   {"id": 1, "model_name": "din", "model_version": 1, "request_id": "r7"}
//   {"id": 1, "timestamps": [{"name": "REQUEST_START", "ns": ...}, ...]}
//   {"id": 1, "activity": "TENSOR_QUEUE_INPUT", "tensor": {"name": "ids", "data": "3,7,9",
//    "shape": "3", "dtype": "INT64", "lengths": "2,1"}}       (one per input; lengths: ragged only)
//   {"id": 1, "activity": "TENSOR_BACKEND_OUTPUT", "tensor": {...}}   (one per output)
// REQUEST_START and QUEUE_START when the frontend had read the request, COMPUTE_START when a
// worker began parsing it, COMPUTE_INPUT_END when it was parsed (the batcher's queue follows),
// COMPUTE_OUTPUT_START when it was scored, COMPUTE_END and REQUEST_END when its answer was
// written; nanoseconds of the steady clock. Traces are written as one JSON array per file:
// to `trace_file` when the server stops (log_frequency 0), or to `trace_file.0`, `.1`, ... every
// `log_frequency` traces and when trace_count runs out. Settings are global, and a model may
// override any of them (a null value drops the override). Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "rankd/request.h"
#include "rankd/status.h"

namespace rankd {

class RequestTracer {
 public:
  using Clock = std::chrono::steady_clock;
  // Setting name -> its values as the API gives them (trace_level may hold several; the others
  // one), or nullopt to drop a model's override.
  using Update = std::map<std::string, std::optional<std::vector<std::string>>>;
  using Settings = std::map<std::string, std::vector<std::string>>;

  RequestTracer();
  ~RequestTracer();  // writes what was collected

  // The settings in force for `model` (global ones where it overrides nothing; "" for global).
  Settings Current(const std::string& model) const;
  // Applies `update` globally (`model` empty) or to `model`. Errors, naming the setting: an
  // unknown setting, a level other than OFF, TIMESTAMPS and TENSORS, a rate below
  // 1, a count below -1, a negative frequency, tracing on without a trace_file, a null for a
  // global setting. Nothing changes on an error.
  Status Apply(const std::string& model, const Update& update);

  // Triton's `--trace-config` flags, applied globally: each "[triton,]SETTING=VALUE" with SETTING
  // level (repeatable), rate, count, file or log-frequency. Errors name the flag: another mode
  // (opentelemetry), an unknown setting, and whatever Apply refuses.
  Status ApplyFlags(const std::vector<std::string>& flags);

  // Whether to trace this request of `model`: its trace id (from 1), or 0.
  uint64_t Sample(const std::string& model);
  struct Times {
    Clock::time_point received, started, parsed, scored, written;
  };
  // Keeps trace `id` (from Sample) of a request answered with `outputs`.
  void Record(uint64_t id, const std::string& model, int64_t version, const InferRequest& request,
              const std::vector<InferOutput>& outputs, const Times& times);

 private:
  struct Resolved {
    bool on = false;  // timestamps or tensors
    bool timestamps = false, tensors = false;
    int64_t rate = 1000, count = -1, log_frequency = 0;
    std::string file;
  };
  Resolved Resolve(const std::string& model) const RANKD_REQUIRES(mu_);
  // Writes the traces collected for `file` as one JSON array: to `file.N` (the next index) when
  // `indexed`, else to `file`.
  void Flush(const std::string& file, bool indexed) RANKD_REQUIRES(mu_);
  struct Output {
    std::vector<std::string> objects;  // JSON objects not yet written
    uint64_t traces = 0;               // traces collected since the file was named
    int next_index = 0;
  };

  mutable Mutex mu_;
  Settings global_ RANKD_GUARDED_BY(mu_);
  std::map<std::string, Settings> models_ RANKD_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> seen_ RANKD_GUARDED_BY(mu_);      // requests per model since its rate changed
  std::map<std::string, int64_t> remaining_ RANKD_GUARDED_BY(mu_);  // traces left where trace_count is set
  std::map<std::string, Output> outputs_ RANKD_GUARDED_BY(mu_);     // by trace_file
  uint64_t next_id_ RANKD_GUARDED_BY(mu_) = 1;
  std::atomic<bool> any_on_{false};  // a fast "no" for every request while tracing is off
};

}  // namespace rankd
