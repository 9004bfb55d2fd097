// `rankd bench engine`: in-process latency of Model::Infer on a file of KServe v2 requests.
//
// Parses every request first (parsing is not timed), warms up on every request, then scores the
// requests in rotation and prints one JSON line: median, p99 and mean latency in ms, pairs/s
// (candidate rows per second at the median) and throughput (rows scored per second of the whole
// run: with --in-flight N, N requests at a time), with the command line. Refuses request sets whose
// inputs are all zero; warns when the medians of the run's quarters differ by more than 25%
// ("spread" in the JSON). A progress line on stderr every few seconds of a long run.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/mutex.h"
#include "runtime/op_profile.h"
#include "serving/model.h"
#include "tools/commands.h"
#include "tools/fresh_ids.h"
#include "tools/request_file.h"

namespace rankd {
namespace {

using Clock = std::chrono::steady_clock;

// A CSV field: quoted, with quotes doubled (RFC 4180).
std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// The tables on disk's counts summed over their tables.
struct DiskCounts {
  uint64_t lookups = 0, hits = 0, rows_read = 0, bytes_read = 0, warmed = 0;
  int64_t capacity = 0, cached = 0;
  uint64_t gpu_hits = 0;  // distinct rows read from the GPU caches in front (not asked of the host caches)
  uint64_t gpu_warmed = 0;
  int64_t gpu_capacity = 0, gpu_cached = 0;
};

DiskCounts SumDiskCounts(const DiskTables* disk) {
  DiskCounts c;
  if (!disk) return c;
  for (const DiskTableStats& s : disk->stats()) {
    c.lookups += s.lookups, c.hits += s.hits, c.rows_read += s.rows_read, c.bytes_read += s.bytes_read;
    c.capacity += s.capacity, c.cached += s.cached, c.warmed += s.warmed;
    c.gpu_hits += s.gpu.hits, c.gpu_capacity += s.gpu.capacity, c.gpu_cached += s.gpu.cached;
    c.gpu_warmed += s.gpu.warmed;
  }
  return c;
}

// The tables on disk as the timed runs left them (their host caches, what was read since the load)
// and what the timed runs alone asked for and read (`before`: the counts as the timing began).
nlohmann::json DiskJson(const DiskTables* disk, const DiskCounts& before, double warm_start_s) {
  if (!disk) return nullptr;
  const DiskCounts now = SumDiskCounts(disk);
  auto ratio = [](uint64_t hits, uint64_t lookups) {
    return lookups ? static_cast<double>(hits) / static_cast<double>(lookups) : 0.0;
  };
  const uint64_t timed_lookups = now.lookups - before.lookups, timed_hits = now.hits - before.hits;
  const uint64_t timed_gpu_hits = now.gpu_hits - before.gpu_hits;
  return {{"tables", disk->stats().size()},
          {"gpu_cache_rows", now.gpu_capacity},
          {"gpu_cached_rows", now.gpu_cached},
          {"host_cache_rows", now.capacity},
          {"host_cached_rows", now.cached},
          {"warmed_rows", now.warmed},
          {"gpu_warmed_rows", now.gpu_warmed},
          {"warm_start_s", warm_start_s},
          {"lookups", now.lookups},
          {"host_hits", now.hits},
          {"rows_read", now.rows_read},
          {"bytes_read", now.bytes_read},
          {"host_hit_ratio", ratio(now.hits, now.lookups)},
          {"timed",
           {{"lookups", timed_lookups},
            {"host_hits", timed_hits},
            {"rows_read", now.rows_read - before.rows_read},
            {"bytes_read", now.bytes_read - before.bytes_read},
            {"host_hit_ratio", ratio(timed_hits, timed_lookups)},
            {"gpu_hits", timed_gpu_hits},
            {"gpu_hit_ratio", ratio(timed_gpu_hits, timed_gpu_hits + timed_lookups)}}}};
}

// The GPU table caches as the timed runs left them, summed over the tables: the slots and how many
// are filled, the rows the keeper moved in and out, the sampled lookups it saw and the offers it
// dropped (it was behind).
nlohmann::json CachesJson(const CacheKeeper* keeper) {
  if (!keeper) return nullptr;
  const std::vector<TableCacheStats> stats = keeper->stats();
  int64_t capacity = 0, cached = 0;
  uint64_t lookups = 0, hits = 0, inserted = 0, evicted = 0;
  for (const TableCacheStats& s : stats) {
    capacity += s.capacity, cached += s.cached;
    lookups += s.lookups, hits += s.hits, inserted += s.inserted, evicted += s.evicted;
  }
  return {{"tables", stats.size()}, {"slots", capacity},
          {"filled", cached},       {"sampled_lookups", lookups},
          {"sampled_hits", hits},   {"inserted", inserted},
          {"evicted", evicted},     {"dropped_offers", stats.empty() ? 0 : stats.front().dropped_offers}};
}

}  // namespace

int BenchEngineCommand(const BenchEngineArgs& args) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "rankd bench engine: %s\n", s.ToString().c_str());
    return 2;
  };
  auto backend = OpenBackend(args.device);
  if (!backend.ok()) return fail(backend.status());
  ModelOptions options;
  options.backend = *backend;
  options.gpus = GpusFlag(args.device);
  options.precision = args.precision;
  options.shape_buckets = args.buckets == "on" ? 1 : args.buckets == "off" ? 0 : -1;
  options.fusion = args.fusion;
  options.user_hoisting = args.hoisting ? -1 : 0;
  if (args.cpu_row_split != "config") options.cpu_row_split = ParseCpuRowSplit(args.cpu_row_split).value();
  options.table_dtype = args.table_dtype;
  if (args.table_gpu_budget_mb) options.table_gpu_budget_mb = *args.table_gpu_budget_mb;
  if (args.table_cache_percent) options.table_cache_fraction = *args.table_cache_percent / 100.0;
  if (!args.tables_on_disk.empty()) options.tables_on_disk = args.tables_on_disk;
  options.table_disk_cache_mb = args.table_disk_cache_mb;
  if (!args.hotness_snapshot.empty()) options.table_hotness_snapshot = args.hotness_snapshot;
  options.table_host_budget_mb = args.table_host_budget_mb;
  options.executors = args.executors;
  options.batching = 0;  // the engine's own latency: requests are not merged (`rankd bench load` merges)
  const auto load_began = std::chrono::steady_clock::now();
  auto model = Model::Load((std::filesystem::path(args.model_repo) / args.model).string(), args.version, options);
  if (!model.ok()) return fail(model.status());
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_began).count();
  // Tables on disk whose host caches start from a hotness snapshot: warmed before anything runs
  // (the time it takes reported apart from the load's).
  double warm_start_s = 0;
  if (const DiskTables* disk = (*model)->disk_tables()) {
    const auto began = std::chrono::steady_clock::now();
    disk->WaitForWarmStart();
    warm_start_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  }
  auto lines = ReadRequestFile(args.requests);
  if (!lines.ok()) return fail(lines.status());
  // As a server's parser hands them over: each ragged input's lengths summed (common/parsed_request.h).
  std::vector<InferRequest> requests;
  std::vector<std::vector<LengthSums>> sums;
  for (RequestLine& l : *lines) {
    requests.push_back(std::move(l.request));
    sums.push_back(std::move(l.length_sums));
  }
  // With --fresh-ids the warm-up runs the file's requests (their shapes' plans built) and the cache
  // warm-up and the timed runs variants of them whose ids they have not seen (tools/fresh_ids.h).
  const std::vector<LookupInput> lookups = args.fresh_ids > 0 ? FindLookupInputs(**model) : std::vector<LookupInput>{};
  std::vector<InferRequest> timed;
  // Variant i of seed S is drawn from (S - 1) * 2^32 + 1 + i, the cache warm-up's k-th from S * 2^40 + k:
  // no two seeds share a draw.
  if (args.fresh_ids > 0)
    timed = FreshIdVariants(requests, lookups, args.fresh_ids, 1.05, ((args.fresh_ids_seed - 1) << 32) + 1);
  auto timed_request = [&](size_t i) -> const InferRequest& {
    return timed.empty() ? requests[i % requests.size()] : timed[i % timed.size()];
  };
  // A variant i is of request i % requests.size(), whose lengths it keeps.
  auto sums_of = [&](size_t i) -> const std::vector<LengthSums>& { return sums[i % requests.size()]; };
  auto first = (*model)->Infer(requests.front(), sums.front());
  if (!first.ok()) return fail(first.status().WithContext("the first request"));
  int64_t rows = first->front().data.dim(0);
  // Warm-up covers every request at least once, so each shape's plan is built before timing, and
  // then waits for the captures its misses queued: the timed runs measure the steady state, not
  // the background captures racing a window of a few milliseconds (W3 replayed 0 to 227 of 321
  // runs from graphs without this wait, docs/log/benchmarks.md). A capture a request's growth undid
  // is made again by a second pass.
  size_t warmup = std::max(static_cast<size_t>(args.warmup), requests.size());
  for (size_t i = 0; i < warmup; ++i) {
    auto out = (*model)->Infer(requests[i % requests.size()], sums[i % requests.size()]);
    if (!out.ok()) return fail(out.status().WithContext("warm-up request " + std::to_string(i % requests.size())));
  }
  // With several requests in flight the passes run on as many threads at once, so that as many
  // executors exist and have built their per-shape state (workspace, cuBLASLt's algorithms timed)
  // before timing: until then a second executor was made and tuned inside the timed runs (W1 at
  // 32,768 pairs, in flight 3: a request of 263 ms).
  const int warm_threads = std::max(1, args.in_flight);
  for (int pass = 0; pass < 2; ++pass) {
    (*model)->WaitForCaptures();
    Mutex warm_mu;
    Status warm_error;
    auto warm = [&] {
      for (size_t k = 0; k < requests.size(); ++k) {
        if (auto out = (*model)->Infer(requests[k], sums[k]); !out.ok()) {
          MutexLock lock(warm_mu);
          if (warm_error.ok()) warm_error = out.status();
          return;
        }
      }
    };
    std::vector<std::thread> warmers;
    for (int t = 1; t < warm_threads; ++t) warmers.emplace_back(warm);
    warm();
    for (std::thread& t : warmers) t.join();
    if (!warm_error.ok()) return fail(warm_error.WithContext("warm-up"));
  }
  (*model)->WaitForCaptures();
  // Table caches: the rows the warm-up's lookups made hot are in before timing; the timed runs'
  // sampled hit ratio is reported.
  auto cache_counts = [&] {
    std::pair<uint64_t, uint64_t> lookups_hits{0, 0};
    if (CacheKeeper* keeper = (*model)->cache_keeper()) {
      if (Status flushed = keeper->Flush(); !flushed.ok())
        std::fprintf(stderr, "warning: %s\n", flushed.ToString().c_str());
      for (const TableCacheStats& t : keeper->stats()) lookups_hits.first += t.lookups, lookups_hits.second += t.hits;
    }
    return lookups_hits;
  };
  // The cache warm-up (GPU caches, and the host caches of tables on disk) replays the file's
  // requests or, with --fresh-ids, scores a variant drawn anew each time (never the timed runs'
  // own), as live traffic keeps asking for rows not seen yet: a few threads each draw a variant and
  // score it, so that drawing does not set the pace.
  if (((*model)->cache_keeper() || (*model)->disk_tables()) && args.cache_warmup_s > 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(args.cache_warmup_s);
    std::atomic<uint64_t> next_warming{0};
    Status warming_error;
    Mutex warming_mu;
    auto warm_caches = [&] {
      while (std::chrono::steady_clock::now() < until) {
        const uint64_t k = next_warming++;
        const size_t i = k % requests.size();
        StatusOr<std::vector<InferOutput>> out =
            args.fresh_ids > 0
                ? (*model)->Infer(FreshIdVariant(requests[i], lookups, 1.05, (args.fresh_ids_seed << 40) + k), sums[i])
                : (*model)->Infer(requests[i], sums[i]);
        if (!out.ok()) {
          MutexLock lock(warming_mu);
          if (warming_error.ok()) warming_error = out.status();
          return;
        }
      }
    };
    const int warming_threads = args.fresh_ids > 0 ? std::max(8, args.in_flight) : 1;
    std::vector<std::thread> warming;
    for (int t = 1; t < warming_threads; ++t) warming.emplace_back(warm_caches);
    warm_caches();
    for (std::thread& t : warming) t.join();
    if (!warming_error.ok()) return fail(warming_error.WithContext("cache warm-up"));
  }
  const auto warm_cache = cache_counts();
  const DiskCounts warm_disk = SumDiskCounts((*model)->disk_tables());
  const BucketCounters warm = (*model)->bucket_counters();
  OpProfile::Reset();  // RANKD_PROFILE reports the timed runs only
  // Timed runs: `in_flight` threads each score requests back to back (closed loop), so with more
  // than one a request's host work overlaps another's device work, as in a loaded server.
  const int threads = std::max(1, args.in_flight);
  std::vector<double> ms(static_cast<size_t>(args.iters));
  std::atomic<int> next{0}, failed{0};
  std::atomic<int64_t> rows_scored{0};
  Mutex error_mu;
  Status error;
  Clock::time_point start = Clock::now();
  // The timed runs' window on the wall clock, so that a GPU's clock and power sampled beside them
  // (bench/gpu_clocks.py) can be read over just this window.
  const double start_unix_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::atomic<int64_t> last_progress{0};
  auto worker = [&] {
    for (int i = next++; i < args.iters && failed == 0; i = next++) {
      const auto k = static_cast<size_t>(i);
      Clock::time_point t0 = Clock::now();
      auto out = (*model)->Infer(timed_request(k), sums_of(k));
      Clock::time_point t1 = Clock::now();
      if (!out.ok()) {
        MutexLock lock(error_mu);
        if (failed++ == 0) error = out.status();
        return;
      }
      ms[static_cast<size_t>(i)] = std::chrono::duration<double, std::milli>(t1 - t0).count();
      rows_scored += out->front().data.dim(0);
      int64_t seconds = std::chrono::duration_cast<std::chrono::seconds>(t1 - start).count();
      int64_t previous = last_progress;
      if (seconds >= previous + 5 && last_progress.compare_exchange_strong(previous, seconds)) {
        std::fprintf(stderr, "  %d of %d runs, %lld s\n", i + 1, args.iters, static_cast<long long>(seconds));
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  double wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (failed > 0) return fail(error);
  std::vector<std::vector<double>> quarters(4);
  for (size_t i = 0; i < ms.size(); ++i) quarters[std::min<size_t>(3, 4 * i / ms.size())].push_back(ms[i]);
  double spread = QuarterSpread(quarters);
  if (spread > 0.25) {
    std::fprintf(stderr, "warning: the medians of the run's four quarters differ by %.0f%%; rerun\n", spread * 100);
  }
  std::sort(ms.begin(), ms.end());
  double median = ms[ms.size() / 2], p99 = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  double mean = 0;
  for (double v : ms) mean += v;
  mean /= static_cast<double>(ms.size());
  auto plan = (*model)->PlanForRequest(requests.front());
  BucketCounters c = (*model)->bucket_counters();  // the timed runs' hits and misses
  c.graph_hits -= warm.graph_hits;
  c.graph_misses -= warm.graph_misses;
  // What one run of the first request puts on the device (none on the CPU).
  nlohmann::json launches = nullptr;
  if (plan.ok()) {
    if (auto l = (*model)->CountLaunches(**plan); l.ok()) {
      launches = {{"kernels", l->kernels},
                  {"copies", l->copies},
                  {"memsets", l->memsets},
                  {"other", l->other},
                  {"kernels_in_a_row", l->kernels_in_a_row}};
    }
  }
  const auto timed_cache = cache_counts();
  const uint64_t cache_lookups = timed_cache.first - warm_cache.first;
  nlohmann::json cache_hit_ratio = nullptr;  // sampled lookups of the timed runs that found their row cached
  if (cache_lookups > 0)
    cache_hit_ratio = static_cast<double>(timed_cache.second - warm_cache.second) / static_cast<double>(cache_lookups);
  const std::string& precision = args.precision.empty() ? (*model)->config().precision : args.precision;  // as run
  nlohmann::json out = {{"label", args.label},
                        {"command", args.command_line},
                        {"model", args.model},
                        {"requests", args.requests},
                        {"backend", (*backend)->name()},
                        {"precision", precision},
                        {"load_s", load_s},
                        {"fresh_ids", args.fresh_ids},
                        {"fresh_id_inputs", lookups.size()},
                        {"table_dtype", DTypeName((*model)->config().table_dtype)},
                        {"table_bytes_on_host", TierBytes((*model)->tables(), TableTier::kHost) +
                                                    TierBytes((*model)->tables(), TableTier::kCache)},
                        {"table_cache_bytes", CachesBytes((*model)->tables())},
                        {"cache_hit_ratio", cache_hit_ratio},
                        {"table_caches", CachesJson((*model)->cache_keeper())},
                        {"table_bytes_on_disk", TierBytes((*model)->tables(), TableTier::kDisk)},
                        {"disk_tables", DiskJson((*model)->disk_tables(), warm_disk, warm_start_s)},
                        {"buckets", (*model)->load_report().buckets},
                        {"graph_hits", c.graph_hits},
                        {"graph_misses", c.graph_misses},
                        {"steps", plan.ok() ? static_cast<int64_t>((*plan)->steps().size()) : -1},
                        {"launches", launches},
                        {"fusion", args.fusion},
                        {"hoisting", (*model)->load_report().hoisting},
                        {"row_split", (*model)->load_report().row_split},
                        {"rows", rows},
                        {"median_ms", median},
                        {"p99_ms", p99},
                        {"mean_ms", mean},
                        {"min_ms", ms.front()},
                        {"max_ms", ms.back()},
                        {"pairs_per_s", static_cast<double>(rows) / (median / 1000.0)},
                        {"spread", spread},
                        {"iters", args.iters},
                        {"in_flight", threads},
                        {"executors", args.executors},
                        {"throughput_pairs_per_s", static_cast<double>(rows_scored) / wall_s},
                        {"timed_start_unix_s", start_unix_s},
                        {"timed_s", wall_s}};
  std::string line = out.dump();
  std::printf("%s\n", line.c_str());
  if (!args.json_path.empty()) std::ofstream(args.json_path) << out.dump(2) << "\n";
  if (!args.csv_path.empty()) {
    bool fresh = !std::filesystem::exists(args.csv_path) || std::filesystem::file_size(args.csv_path) == 0;
    std::ofstream csv(args.csv_path, std::ios::app);
    if (fresh) {
      csv << "label,model,backend,precision,buckets,rows,median_ms,p99_ms,mean_ms,pairs_per_s,spread,iters,in_flight,"
             "throughput_pairs_per_s,cache_hit_ratio\n";
    }
    csv << Quoted(args.label) << "," << Quoted(args.model) << "," << (*backend)->name() << "," << precision << ","
        << Quoted((*model)->load_report().buckets) << "," << rows << "," << median << "," << p99 << "," << mean << ","
        << out["pairs_per_s"].get<double>() << "," << spread << "," << args.iters << "," << threads << ","
        << out["throughput_pairs_per_s"].get<double>() << ","
        << (cache_hit_ratio.is_null() ? std::string() : std::to_string(cache_hit_ratio.get<double>())) << "\n";
  }
  if (OpProfile::phases()) std::fprintf(stderr, "%s", OpProfile::Report().c_str());
  return 0;
}

}  // namespace rankd
