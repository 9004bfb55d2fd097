#include "serving/metrics.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "common/host_allocator.h"
#include "common/host_copies.h"
#include "serving/repository.h"

namespace rankd {
namespace {

// A Prometheus histogram's lines for one label set: cumulative buckets, sum and count.
std::string HistogramLines(const std::string& name, const std::string& labels, const LatencyHistogram& h) {
  std::string lines;
  for (size_t b = 0; b <= LatencyHistogram::kBounds.size(); ++b) {
    char le[32];
    if (b < LatencyHistogram::kBounds.size()) {
      std::snprintf(le, sizeof(le), "%g", LatencyHistogram::kBounds[b]);
    } else {
      std::snprintf(le, sizeof(le), "+Inf");
    }
    lines += name + "_bucket{" + labels + ",le=\"" + le + "\"} " + std::to_string(h.AtMost(b)) + "\n";
  }
  char sum[32];
  std::snprintf(sum, sizeof(sum), "%.6f", h.sum_seconds);
  lines += name + "_sum{" + labels + "} " + sum + "\n";
  lines += name + "_count{" + labels + "} " + std::to_string(h.count) + "\n";
  return lines;
}

uint64_t UnixMs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

}  // namespace

Metrics::PerModel& Metrics::CountsOf(const std::string& model, int64_t version) {
  auto it = models_.find(std::pair<std::string_view, int64_t>(model, version));
  if (it == models_.end()) it = models_.try_emplace(std::pair<std::string, int64_t>(model, version)).first;
  return it->second;
}

void Metrics::RecordSuccess(const std::string& model, int64_t version, const RequestTiming& t) {
  MutexLock lock(mu_);
  PerModel& m = CountsOf(model, version);
  ++m.success;
  if (t.execution) {
    ++m.execs;
    BatchCounts& b = m.batches[t.batch_rows];
    ++b.count;
    b.input_us += t.input_us;
    b.infer_us += t.infer_us;
    b.output_us += t.output_us;
  }
  m.rows += static_cast<uint64_t>(t.rows);
  m.request_us += t.total_us;
  m.queue_us += t.queue_us;
  m.input_us += t.input_us;
  m.infer_us += t.infer_us;
  m.output_us += t.output_us;
  m.buckets = t.buckets;
  m.recent_us.push_back(t.total_us);
  if (m.recent_us.size() > 1024) m.recent_us.pop_front();
  m.last_unix_ms = UnixMs();
}

void Metrics::RecordFailure(const std::string& model, int64_t version) {
  MutexLock lock(mu_);
  PerModel& m = CountsOf(model, version);
  ++m.failure;
  m.last_unix_ms = UnixMs();
}

ModelCounts Metrics::Counts(const std::string& model, int64_t version) const {
  MutexLock lock(mu_);
  auto it = models_.find({model, version});
  return it == models_.end() ? ModelCounts{} : static_cast<const ModelCounts&>(it->second);
}

void Metrics::RecordLoadFailure(const std::string& model) {
  MutexLock lock(mu_);
  ++load_failures_[model];
}

std::string Metrics::Text() const {
  MutexLock lock(mu_);
  std::string out;
  // The map is passed in, read under the lock here: a lambda's body is checked as a function of its own.
  auto family = [&out](const auto& models, const char* name, const char* help, const char* type, auto value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    for (const auto& [key, m] : models) {
      out += std::string(name) + "{model=\"" + key.first + "\",version=\"" + std::to_string(key.second) + "\"} " +
             std::to_string(value(m)) + "\n";
    }
  };
  family(models_, "nv_inference_request_success", "Number of successful inference requests", "counter",
         [](const PerModel& m) { return m.success; });
  family(models_, "nv_inference_request_failure", "Number of failed inference requests", "counter",
         [](const PerModel& m) { return m.failure; });
  family(models_, "nv_inference_count", "Number of inferences (rows) performed", "counter",
         [](const PerModel& m) { return m.rows; });
  family(models_, "nv_inference_exec_count", "Number of model executions (batches)", "counter",
         [](const PerModel& m) { return m.execs; });
  family(models_, "nv_inference_request_duration_us", "Cumulative inference request duration in microseconds",
         "counter", [](const PerModel& m) { return m.request_us; });
  family(models_, "nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds", "counter",
         [](const PerModel& m) { return m.queue_us; });
  family(models_, "nv_inference_compute_input_duration_us", "Cumulative compute input duration in microseconds",
         "counter", [](const PerModel& m) { return m.input_us; });
  family(models_, "nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds",
         "counter", [](const PerModel& m) { return m.infer_us; });
  family(models_, "nv_inference_compute_output_duration_us",
         "Cumulative inference compute output duration in microseconds", "counter",
         [](const PerModel& m) { return m.output_us; });
  family(models_, "rankd_graph_hits", "Executions that replayed a captured CUDA graph", "counter",
         [](const PerModel& m) { return m.buckets.graph_hits; });
  family(models_, "rankd_graph_misses", "Executions that ran uncaptured while graphs are on", "counter",
         [](const PerModel& m) { return m.buckets.graph_misses; });
  family(models_, "rankd_graph_captures", "Plans captured as graphs, per executor, warm-up included", "counter",
         [](const PerModel& m) { return m.buckets.captures; });
  family(models_, "rankd_graph_capture_failures", "Plans whose capture failed; they run uncaptured", "counter",
         [](const PerModel& m) { return m.buckets.capture_failures; });
  family(models_, "rankd_graph_capture_duration_us", "Cumulative time spent capturing graphs", "counter",
         [](const PerModel& m) { return m.buckets.capture_us; });
  family(models_, "rankd_bucket_real_rows", "Rows of executions padded to a shape bucket, before padding", "counter",
         [](const PerModel& m) { return m.buckets.real_rows; });
  family(models_, "rankd_bucket_padded_rows", "Rows of executions padded to a shape bucket, after padding", "counter",
         [](const PerModel& m) { return m.buckets.padded_rows; });
  family(models_, "rankd_batch_merges_deferred", "Batches run as their requests because their bucket had no graph yet",
         "counter", [](const PerModel& m) { return m.buckets.merges_deferred; });
  out += "# HELP nv_inference_request_summary_us Request duration quantiles over the last 1024 requests\n";
  out += "# TYPE nv_inference_request_summary_us summary\n";
  for (const auto& [key, m] : models_) {
    std::vector<uint64_t> v(m.recent_us.begin(), m.recent_us.end());
    std::sort(v.begin(), v.end());
    std::string labels = "model=\"" + key.first + "\",version=\"" + std::to_string(key.second) + "\"";
    for (double q : {0.5, 0.9, 0.99}) {
      uint64_t x = v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
      char qs[32];
      std::snprintf(qs, sizeof qs, "%g", q);
      out += "nv_inference_request_summary_us{" + labels + ",quantile=\"" + qs + "\"} " + std::to_string(x) + "\n";
    }
    out += "nv_inference_request_summary_us_sum{" + labels + "} " + std::to_string(m.request_us) + "\n";
    out += "nv_inference_request_summary_us_count{" + labels + "} " + std::to_string(m.success) + "\n";
  }
  out += "# HELP rankd_inflight_requests Inference requests being served now\n# TYPE rankd_inflight_requests gauge\n";
  out += "rankd_inflight_requests " + std::to_string(inflight_.load()) + "\n";
  out +=
      "# HELP rankd_overload_refusals Inference calls refused unread, too many waiting or waiting too long\n"
      "# TYPE rankd_overload_refusals counter\n";
  out += "rankd_overload_refusals " + std::to_string(overload_refusals_.load()) + "\n";
  out +=
      "# HELP rankd_host_input_copy_bytes_total Bytes of requests' input tensors copied on the host, by stage\n"
      "# TYPE rankd_host_input_copy_bytes_total counter\n";
  for (int stage = 0; stage < kHostCopyStages; ++stage) {
    const auto where = static_cast<HostCopy>(stage);
    out += std::string("rankd_host_input_copy_bytes_total{stage=\"") + HostCopyName(where) + "\"} " +
           std::to_string(HostCopiedBytes(where)) + "\n";
  }
  if (const HostAllocator* pool = CurrentHostAllocator()) {
    out +=
        "# HELP rankd_request_tensor_pool_bytes Host memory held for request tensors (page-locked on GPUs), in use or "
        "free\n# TYPE rankd_request_tensor_pool_bytes gauge\n";
    out += "rankd_request_tensor_pool_bytes " + std::to_string(pool->reserved_bytes()) + "\n";
    out +=
        "# HELP rankd_request_tensors_on_heap_total Request tensors the pool could not serve (full, too large, or "
        "a capture under way), made on the heap (copied to a device's staging buffer before a run)\n"
        "# TYPE rankd_request_tensors_on_heap_total counter\n";
    out += "rankd_request_tensors_on_heap_total " + std::to_string(RequestTensorsOnHeap()) + "\n";
  }
  out +=
      "# HELP rankd_model_load_failures Loads of a model's version or config that failed\n"
      "# TYPE rankd_model_load_failures counter\n";
  for (const auto& [model, count] : load_failures_) {
    out += "rankd_model_load_failures{model=\"" + model + "\"} " + std::to_string(count) + "\n";
  }
  return out;
}

std::string TableMetricsText(const ModelRepository& repository) {
  struct Family {
    const char* name;
    const char* help;
    const char* type;
  };
  const Family bytes{"rankd_table_bytes",
                     "Bytes of embedding tables per tier (gpu: tables in device memory; cache: device memory of "
                     "their GPU caches, index included; host: page-locked host memory, cached tables included; disk: "
                     "tables read from files)",
                     "gauge"};
  const Family caches[] = {
      {"rankd_table_cache_rows", "Rows a table's GPU cache holds now", "gauge"},
      {"rankd_table_cache_capacity_rows", "Rows a table's GPU cache can hold", "gauge"},
      {"rankd_table_cache_lookups", "Sampled lookups of a cached table the cache's keeper saw", "counter"},
      {"rankd_table_cache_hits", "Of rankd_table_cache_lookups, those whose row was cached", "counter"},
      {"rankd_table_cache_inserted", "Rows moved into a table's GPU cache", "counter"},
      {"rankd_table_cache_evicted", "Rows evicted from a table's GPU cache", "counter"},
      {"rankd_table_cache_staged_rows",
       "Rows runs of many ids missed in a table's GPU cache that the host gathered before their launch", "counter"},
      {"rankd_table_cache_unstaged_rows",
       "Rows such runs missed that the GPU read from host memory itself, for want of staging room", "counter"},
  };
  const Family disks[] = {
      {"rankd_table_disk_cache_rows", "Rows of a table on disk its host cache holds", "gauge"},
      {"rankd_table_disk_cache_capacity_rows", "Rows a table on disk's host cache can hold", "gauge"},
      {"rankd_table_disk_cache_host_bytes", "Host memory of a table on disk's host cache: its rows and its policy's",
       "gauge"},
      {"rankd_table_disk_lookups", "Distinct rows runs read from a table on disk", "counter"},
      {"rankd_table_disk_cache_hits", "Of rankd_table_disk_lookups, those its host cache held", "counter"},
      {"rankd_table_disk_rows_read", "Rows read from a table's file (by runs and by its host cache's warm start)",
       "counter"},
      {"rankd_table_disk_bytes_read", "Bytes read from a table's file (whole aligned blocks)", "counter"},
      {"rankd_table_disk_cache_inserted", "Rows moved into a table on disk's host cache", "counter"},
      {"rankd_table_disk_cache_evicted", "Rows evicted from a table on disk's host cache", "counter"},
      {"rankd_table_disk_cache_warmed", "Rows moved into a table on disk's host cache from the hotness snapshot",
       "counter"},
      {"rankd_table_disk_gpu_cache_rows", "Rows of a table on disk the GPU cache in front of it holds", "gauge"},
      {"rankd_table_disk_gpu_cache_capacity_rows", "Rows the GPU cache in front of a table on disk can hold", "gauge"},
      {"rankd_table_disk_gpu_cache_hits", "Distinct rows of runs read from the GPU cache in front of a table on disk",
       "counter"},
      {"rankd_table_disk_gpu_cache_inserted", "Rows moved into the GPU cache in front of a table on disk", "counter"},
      {"rankd_table_disk_gpu_cache_evicted", "Rows moved out of the GPU cache in front of a table on disk", "counter"},
      {"rankd_table_disk_gpu_cache_warmed",
       "Of rankd_table_disk_gpu_cache_inserted, rows moved in from the hotness snapshot", "counter"},
  };
  std::string out =
      std::string("# HELP ") + bytes.name + " " + bytes.help + "\n# TYPE " + bytes.name + " " + bytes.type + "\n";
  const char* reads = "rankd_table_disk_read_seconds";
  const char* gathers = "rankd_table_cache_gather_seconds";
  std::string cache_lines[std::size(caches)], disk_lines[std::size(disks)], unknown_lines, read_lines, gather_lines;
  for (const RepositoryIndexEntry& e : repository.Index()) {
    if (e.state != "READY") continue;
    auto model = repository.Get(e.name, e.version);
    if (!model.ok()) continue;  // unloaded since the index was taken
    const std::string labels = "model=\"" + e.name + "\",version=\"" + std::to_string(e.version) + "\"";
    const std::vector<TableInfo>& tables = (*model)->tables();
    const int64_t tier_bytes[] = {TierBytes(tables, TableTier::kDevice), CachesBytes(tables),
                                  TierBytes(tables, TableTier::kHost) + TierBytes(tables, TableTier::kCache),
                                  TierBytes(tables, TableTier::kDisk)};
    const char* tiers[] = {"gpu", "cache", "host", "disk"};
    for (size_t i = 0; i < std::size(tiers); ++i) {
      out += std::string(bytes.name) + "{" + labels + ",tier=\"" + tiers[i] + "\"} " + std::to_string(tier_bytes[i]) +
             "\n";
    }
    for (const auto& [table, count] : (*model)->UnknownKeys()) {
      unknown_lines +=
          "rankd_keyed_table_unknown_keys{" + labels + ",table=\"" + table + "\"} " + std::to_string(count) + "\n";
    }
    if (const DiskTables* disk = (*model)->disk_tables()) {
      for (const DiskTableStats& t : disk->stats()) {
        const uint64_t values[] = {static_cast<uint64_t>(t.cached),
                                   static_cast<uint64_t>(t.capacity),
                                   t.host_bytes,
                                   t.lookups,
                                   t.hits,
                                   t.rows_read,
                                   t.bytes_read,
                                   t.inserted,
                                   t.evicted,
                                   t.warmed,
                                   static_cast<uint64_t>(t.gpu.cached),
                                   static_cast<uint64_t>(t.gpu.capacity),
                                   t.gpu.hits,
                                   t.gpu.inserted,
                                   t.gpu.evicted,
                                   t.gpu.warmed};
        static_assert(sizeof(values) / sizeof(values[0]) == sizeof(disks) / sizeof(disks[0]));
        const size_t gpu_from = std::size(disks) - 6;  // the last six families: the GPU cache's, where it has one
        for (size_t i = 0; i < std::size(disks); ++i) {
          if (i >= gpu_from && !t.gpu_cache) continue;
          disk_lines[i] += std::string(disks[i].name) + "{" + labels + ",table=\"" + t.table + "\"} " +
                           std::to_string(values[i]) + "\n";
        }
        read_lines += HistogramLines(reads, labels + ",table=\"" + t.table + "\"", t.reads);
      }
    }
    const CacheKeeper* keeper = (*model)->cache_keeper();
    if (!keeper) continue;
    for (const TableCacheStats& t : keeper->stats()) {
      const uint64_t values[] = {static_cast<uint64_t>(t.cached),
                                 static_cast<uint64_t>(t.capacity),
                                 t.lookups,
                                 t.hits,
                                 t.inserted,
                                 t.evicted,
                                 t.gathered.staged,
                                 t.gathered.unstaged};
      for (size_t i = 0; i < std::size(caches); ++i) {
        cache_lines[i] += std::string(caches[i].name) + "{" + labels + ",table=\"" + t.table + "\"} " +
                          std::to_string(values[i]) + "\n";
      }
      gather_lines += HistogramLines(gathers, labels + ",table=\"" + t.table + "\"", t.gathered.seconds);
    }
  }
  for (size_t i = 0; i < std::size(caches); ++i) {
    if (cache_lines[i].empty()) continue;
    out += std::string("# HELP ") + caches[i].name + " " + caches[i].help + "\n# TYPE " + caches[i].name + " " +
           caches[i].type + "\n" + cache_lines[i];
  }
  for (size_t i = 0; i < std::size(disks); ++i) {
    if (disk_lines[i].empty()) continue;
    out += std::string("# HELP ") + disks[i].name + " " + disks[i].help + "\n# TYPE " + disks[i].name + " " +
           disks[i].type + "\n" + disk_lines[i];
  }
  if (!read_lines.empty()) {
    out += std::string("# HELP ") + reads +
           " Seconds each read of a run's missed rows from a table on disk's file took (one io_uring batch a "
           "shard)\n# TYPE " +
           reads + " histogram\n" + read_lines;
  }
  if (!gather_lines.empty()) {
    out += std::string("# HELP ") + gathers +
           " Seconds of host time a run spent placing one input's ids in a table's GPU cache: finding its misses and "
           "gathering their rows (runs of many ids; summed over the threads placing them)\n# TYPE " +
           gathers + " histogram\n" + gather_lines;
  }
  if (!unknown_lines.empty()) {
    out +=
        "# HELP rankd_keyed_table_unknown_keys Keys a keyed table's lookups read that its files do not hold (each "
        "read the table's default row)\n# TYPE rankd_keyed_table_unknown_keys counter\n" +
        unknown_lines;
  }
  return out;
}

std::string ReplicaMetricsText(const ModelRepository& repository) {
  std::string lines[3];
  for (const RepositoryIndexEntry& e : repository.Index()) {
    if (e.state != "READY") continue;
    auto model = repository.Get(e.name, e.version);
    if (!model.ok()) continue;  // unloaded since the index was taken
    for (const ReplicaState& r : (*model)->replicas()) {
      if (r.backend != "cuda") continue;
      const std::string labels = "{model=\"" + e.name + "\",version=\"" + std::to_string(e.version) + "\",gpu=\"" +
                                 std::to_string(r.device) + "\"} ";
      lines[0] += "rankd_gpu_executions" + labels + std::to_string(r.runs) + "\n";
      lines[1] += "rankd_gpu_busy_executors" + labels + std::to_string(r.busy) + "\n";
      lines[2] += "rankd_gpu_healthy" + labels + (r.healthy ? "1" : "0") + "\n";
    }
  }
  if (lines[0].empty()) return "";
  return "# HELP rankd_gpu_executions Executions a model's replica on a GPU ran\n"
         "# TYPE rankd_gpu_executions counter\n" +
         lines[0] +
         "# HELP rankd_gpu_busy_executors Executors of a model's replica on a GPU running now\n"
         "# TYPE rankd_gpu_busy_executors gauge\n" +
         lines[1] +
         "# HELP rankd_gpu_healthy Whether a model's replica's GPU can run work (0: an unrecoverable error)\n"
         "# TYPE rankd_gpu_healthy gauge\n" +
         lines[2];
}

std::string RouteMetricsText(const ModelRepository& repository) {
  std::string runs, rows, fallbacks, times;
  for (const RepositoryIndexEntry& e : repository.Index()) {
    if (e.state != "READY") continue;
    auto model = repository.Get(e.name, e.version);
    if (!model.ok() || !(*model)->cpu_route()) continue;
    const RouteCounts counts = (*model)->cpu_route()->counts();
    const std::string labels = "model=\"" + e.name + "\",version=\"" + std::to_string(e.version) + "\"";
    for (bool cpu : {false, true}) {
      const RouteSideCounts& side = cpu ? counts.cpu : counts.device;
      const std::string backend = labels + ",route=\"" + (cpu ? "cpu" : "device") + "\"";
      runs += "rankd_route_runs{" + backend + "} " + std::to_string(side.runs) + "\n";
      rows += "rankd_route_rows{" + backend + "} " + std::to_string(side.rows) + "\n";
      times += HistogramLines("rankd_route_run_seconds", backend, side.latency);
    }
    fallbacks += "rankd_route_fallbacks{" + labels + "} " + std::to_string(counts.fallbacks) + "\n";
  }
  if (runs.empty()) return "";
  return "# HELP rankd_route_runs Runs of a model with CPU routing on its device and on the CPU (a merged batch is "
         "one)\n"
         "# TYPE rankd_route_runs counter\n" +
         runs +
         "# HELP rankd_route_rows Rows (candidates) a model with CPU routing scored on its device and on the CPU\n"
         "# TYPE rankd_route_rows counter\n" +
         rows +
         "# HELP rankd_route_fallbacks Runs on the CPU because the model's device could no longer run work\n"
         "# TYPE rankd_route_fallbacks counter\n" +
         fallbacks +
         "# HELP rankd_route_run_seconds Seconds a run took on the device or the CPU, its wait for an executor "
         "included\n"
         "# TYPE rankd_route_run_seconds histogram\n" +
         times;
}

}  // namespace rankd
