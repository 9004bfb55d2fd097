// Metrics: per model version counters and latencies, in Prometheus text with Triton's names.
//
//   nv_inference_request_success / _failure   requests that succeeded / failed
//   nv_inference_count                        rows (candidates) scored
//   nv_inference_exec_count                   model executions (batches: below request_success
//                                             when the batcher merges requests)
//   nv_inference_request_duration_us          cumulative end-to-end time of successful requests
//   nv_inference_queue_duration_us            cumulative time waiting for a worker and the batcher
//   nv_inference_compute_input/infer/output_duration_us   parse / score / serialise
//   nv_inference_request_summary_us{quantile} p50, p90, p99 over the last 1024 requests
//   rankd_inflight_requests                   requests being served now (all models)
//   rankd_host_input_copy_bytes_total{stage}  requests' input bytes copied on the host (all models;
//                                             common/host_copies.h): request, merge, pad, staging
//   rankd_request_tensor_pool_bytes           host memory the request tensors' pool holds (GPU servers)
//   rankd_request_tensors_on_heap_total       request tensors that pool could not serve, made on the heap
//   rankd_model_load_failures                 loads of a model's version (or config) that failed
//   rankd_graph_hits / _misses                executions that replayed a captured graph / ran uncaptured
//   rankd_graph_captures, _capture_duration_us plans captured (warm-up and background) and the time taken
//   rankd_bucket_real_rows / _padded_rows     rows of bucketed executions before and after padding
//   rankd_batch_merges_deferred               batches run as their requests: no graph for their bucket yet
//   rankd_table_bytes{tier}                   embedding tables' bytes on the GPU, in their GPU caches and in
//                                             host memory, per loaded version (TableMetricsText, docs/embedding.md)
//   rankd_table_cache_*{table}                a cached table's cache: rows, sampled lookups and hits, rows
//                                             inserted and evicted
//   rankd_route_runs{route}, rankd_route_rows{route}, rankd_route_fallbacks, rankd_route_run_seconds{route}
//                                             per model with CPU routing (RouteMetricsText, docs/routing.md)
//   rankd_gpu_executions{gpu}, rankd_gpu_busy_executors{gpu}, rankd_gpu_healthy{gpu}
//                                             per replica of a model on a GPU (ReplicaMetricsText,
//                                             docs/replicas.md)
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "serving/shape_buckets.h"

namespace rankd {

struct RequestTiming {
  uint64_t queue_us = 0, input_us = 0, infer_us = 0, output_us = 0, total_us = 0;
  int64_t rows = 0;
  int64_t batch_rows = 0;  // rows of the execution it ran in (its own unless merged)
  bool execution = true;   // counts one model execution (a batch's first request does)
  BucketCounters buckets;  // the model's counters after this request (they are the model's own)
};

// A model version's counts since the server started, for the statistics API (Triton's
// ModelStatistics; frontend/triton_stats.h): requests that succeeded with their summed phases,
// requests that failed, rows scored, executions, and when the last request was answered.
// `batches`: executions by their rows (a merged batch's rows together), each with the phases of
// the request that counts it (Triton's batch_stats).
struct BatchCounts {
  uint64_t count = 0, input_us = 0, infer_us = 0, output_us = 0;
};
struct ModelCounts {
  uint64_t success = 0, failure = 0, rows = 0, execs = 0;
  uint64_t request_us = 0, queue_us = 0, input_us = 0, infer_us = 0, output_us = 0;
  uint64_t last_unix_ms = 0;  // 0: none yet
  std::map<int64_t, BatchCounts> batches;
};

class Metrics {
 public:
  void RecordSuccess(const std::string& model, int64_t version, const RequestTiming& t);
  void RecordFailure(const std::string& model, int64_t version);
  void AddInflight(int delta) { inflight_ += delta; }
  void RecordLoadFailure(const std::string& model);
  // An inference call refused before it was read, the server being overloaded (gRPC's CallQueue,
  // or an HTTP request that waited too long for a worker).
  void RecordOverloadRefusal() { ++overload_refusals_; }
  // The Prometheus text exposition of everything recorded.
  std::string Text() const;
  // The counts of `model` version `version` (zeros when it served nothing yet).
  ModelCounts Counts(const std::string& model, int64_t version) const;

 private:
  struct PerModel : ModelCounts {
    std::deque<uint64_t> recent_us;  // last 1024 request durations
    BucketCounters buckets;          // as last reported
  };
  // (model, version) keys, found by a view of the name: no copy of it a request.
  struct KeyLess {
    using is_transparent = void;
    bool operator()(std::pair<std::string_view, int64_t> a, std::pair<std::string_view, int64_t> b) const {
      return a < b;
    }
  };
  // The model's counts, made on its first request.
  PerModel& CountsOf(const std::string& model, int64_t version) RANKD_REQUIRES(mu_);
  mutable Mutex mu_;
  std::map<std::pair<std::string, int64_t>, PerModel, KeyLess> models_ RANKD_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> load_failures_ RANKD_GUARDED_BY(mu_);
  std::atomic<int64_t> inflight_{0};
  std::atomic<uint64_t> overload_refusals_{0};
};

class ModelRepository;
// rankd_table_bytes{model, version, tier="gpu"|"cache"|"host"} and the table caches' counts
// (rankd_table_cache_*{model, version, table}) for every version `repository` serves now.
std::string TableMetricsText(const ModelRepository& repository);
// Per replica on a GPU of every version `repository` serves now ({model, version, gpu}): the
// executions it ran, its executors busy now and whether its GPU can run work (1) or met an
// unrecoverable error (0).
std::string ReplicaMetricsText(const ModelRepository& repository);
// Per model with CPU routing that `repository` serves now ({model, version, route="device"|"cpu"}): runs and
// rows on its device and on the CPU, their run times, and runs that fell back to the CPU.
std::string RouteMetricsText(const ModelRepository& repository);

}  // namespace rankd
