#include "embedding/cache_keeper.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <set>

#include "common/idle_priority.h"
#include "common/log.h"
#include "common/thread_name.h"
#include "embedding/hotness_snapshot.h"
#include "embedding/lookup_sample.h"
#include "embedding/lookup_trace.h"
#include "embedding/lookups.h"

namespace rankd {
namespace {

constexpr uint64_t kRowMask = (uint64_t{1} << 48) - 1;

}  // namespace

CacheKeeper::CacheKeeper(const Graph& graph, const std::map<int, TableCache*>& caches, CacheKeeperOptions options)
    : graph_(graph), options_(options), tables_(FindTables(graph)) {
  std::set<int> cached_values;
  for (size_t t = 0; t < tables_.size(); ++t) {
    auto it = caches.find(tables_[t].value);
    if (it == caches.end()) continue;
    Table& kept = kept_[static_cast<int>(t)];
    kept.cache = it->second;
    kept.seed = t + 1;
    kept.stats.table = tables_[t].name;
    kept.stats.capacity = kept.cache->capacity();
    // A cache another version of the model made and still reads (backend/table_cache.h): this keeper
    // decides its rows from now on, starting from those it holds.
    kept.claim = kept.cache->Claim();
    Adopt(kept);
    cached_values.insert(tables_[t].value);
  }
  // The inputs AppendLookups reads: ids and keys as they are, and those ids are computed from.
  sampling_ = PlanLookupSampling(graph, std::vector<int>(cached_values.begin(), cached_values.end()),
                                 static_cast<bool>(options_.evaluate_node));
  kept_by_index_.assign(tables_.size(), nullptr);
  for (auto& [t, kept] : kept_) kept_by_index_[static_cast<size_t>(t)] = &kept;
  {
    MutexLock lock(mu_);
    for (const auto& [t, kept] : kept_) published_.push_back(kept.stats);
    busy_ = true;  // filling whole tables (Loop): Flush waits for it
  }
  thread_ = std::thread([this] {
    NameThisThread("rankd-cache");
    Loop();
  });
}

CacheKeeper::~CacheKeeper() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
  if (Status saved = SaveSnapshot(); !saved.ok()) LogError(saved.ToString());
  for (auto& [t, table] : kept_) table.cache->Release(table.claim);
}

Status CacheKeeper::WarmStart() {
  if (options_.snapshot_path.empty()) return Status::Ok();
  StatusOr<HotnessSnapshot> saved = LoadHotness(options_.snapshot_path);
  if (saved.status().code() == StatusCode::kNotFound) return Status::Ok();  // a first run
  if (!saved.ok()) {
    LogWarning("hotness snapshot " + options_.snapshot_path + ": " + saved.status().ToString() +
               " (the caches start cold)");
    return Status::Ok();
  }
  std::map<int, HotKeys> per_table;
  for (const auto& [key, count] : RekeyHotness(std::move(*saved), TableNames())) {
    const int t = static_cast<int>(key >> 48);
    const auto row = static_cast<int64_t>(key & kRowMask);
    if (kept_.count(t) && row < tables_[static_cast<size_t>(t)].rows()) per_table[t].emplace_back(row, count);
  }
  Status status;
  for (auto& [t, hot] : per_table) {
    Table& table = kept_.at(t);
    table.policy->WarmStart(hot);
    Status applied = ApplyChanges(table);
    if (!applied.ok() && status.ok()) status = applied;
  }
  return status;
}

void CacheKeeper::Adopt(Table& table) {
  CachePolicyOptions policy;
  policy.capacity = table.cache->capacity();
  policy.seed = table.seed;
  table.policy = std::make_unique<CachePolicy>(policy);
  table.policy->Adopt(table.cache->rows_of_slots());
  table.stats.cached = table.policy->size();
  table.deciding = true;
}

std::vector<std::string> CacheKeeper::TableNames() const {
  std::vector<std::string> names;
  for (const TableInfo& t : tables_) names.push_back(t.name);
  return names;
}

Status CacheKeeper::SaveSnapshot() {
  if (options_.snapshot_path.empty() || !changed_since_save_) return Status::Ok();
  for (const auto& [t, table] : kept_) {
    if (!table.cache->Claimed(table.claim)) return Status::Ok();  // a newer version keeps them, and saves
  }
  HotKeys hot;
  for (const auto& [t, table] : kept_) {
    for (const auto& [row, count] : table.policy->Snapshot())
      hot.emplace_back(RowKey(t, static_cast<int64_t>(row)), count);
  }
  std::stable_sort(hot.begin(), hot.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  changed_since_save_ = false;
  return SaveHotness(options_.snapshot_path, TableNames(), hot);
}

void CacheKeeper::Offer(std::span<const Tensor> graph_inputs) {
  if (sampling_.inputs.empty()) return;
  {
    MutexLock lock(mu_);
    if (static_cast<int>(pending_.size()) >= options_.max_pending) {
      ++dropped_;
      return;
    }
  }
  std::vector<Tensor> kept =
      SampleLookupInputs(sampling_, graph_inputs, options_.sample_ids, offers_.fetch_add(1, std::memory_order_relaxed));
  {
    MutexLock lock(mu_);
    pending_.push_back(std::move(kept));
  }
  changed_.notify_all();
}

Status CacheKeeper::Flush() {
  MutexLock lock(mu_);
  while (!pending_.empty() || busy_) changed_.wait(lock.native());
  Status error = error_;
  error_ = Status::Ok();
  return error;
}

std::vector<TableCacheStats> CacheKeeper::stats() const {
  MutexLock lock(mu_);
  std::vector<TableCacheStats> out = published_;
  auto kept = kept_.begin();  // published_ lists kept_'s tables in order (TableStats)
  for (TableCacheStats& s : out) {
    s.dropped_offers = dropped_;
    if (kept != kept_.end()) s.gathered = (kept++)->second.cache->gathered();
  }
  return out;
}

// A cache with room for every row of its table holds all of them from the start: there is nothing
// for a policy to choose.
Status CacheKeeper::FillWholeTables() {
  Status status;
  for (auto& [t, table] : kept_) {
    const int64_t rows = tables_[static_cast<size_t>(t)].rows();
    if (table.policy->capacity() < rows) continue;
    std::vector<std::pair<uint64_t, int>> all;
    all.reserve(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) all.emplace_back(static_cast<uint64_t>(r), 0);
    table.policy->WarmStart(all);
    Status applied = ApplyChanges(table);
    if (!applied.ok() && status.ok()) status = applied;
  }
  return status;
}

void CacheKeeper::Loop() {
  Status filled = FillWholeTables();
  if (filled.ok()) filled = WarmStart();
  std::vector<TableCacheStats> filled_stats = TableStats();
  if (options_.idle_priority) RunAtIdlePriority();  // where refused, it keeps its priority
  MutexLock lock(mu_);
  busy_ = false;
  if (!filled.ok()) error_ = filled;
  published_ = std::move(filled_stats);
  changed_.notify_all();
  auto saved_at = std::chrono::steady_clock::now();
  const auto save_every = std::chrono::duration<double>(options_.save_every_s);
  while (true) {
    while (pending_.empty() && !stop_) {
      if (changed_since_save_ && std::chrono::steady_clock::now() - saved_at >= save_every) {
        lock.Unlock();
        if (Status saved = SaveSnapshot(); !saved.ok()) LogError(saved.ToString());
        lock.Lock();
        saved_at = std::chrono::steady_clock::now();
        continue;
      }
      changed_.wait_for(lock.native(), save_every);
    }
    if (stop_) return;
    std::vector<Tensor> inputs = std::move(pending_.front());
    pending_.pop_front();
    busy_ = true;
    lock.Unlock();
    Status kept = Keep(inputs);
    std::vector<TableCacheStats> stats = TableStats();
    lock.Lock();
    busy_ = false;
    if (!kept.ok() && error_.ok()) error_ = kept;
    published_ = std::move(stats);
    changed_.notify_all();
  }
}

Status CacheKeeper::Keep(const std::vector<Tensor>& inputs) {
  trace_.clear();
  Status failed;
  const std::unordered_map<int, Tensor> computed =
      ComputeIdValues(graph_, sampling_.computed, inputs, options_.evaluate_node, &failed);
  if (!failed.ok() && !computed_failed_) {
    computed_failed_ = true;
    LogWarning("table caches: ids a lookup computes could not be computed from a sample (" + failed.ToString() +
               "); its rows are not traced");
  }
  // A table whose cache a newer version claimed is left to that version's keeper; when the claim
  // comes back (that version's load failed), its policy starts again from what the cache holds.
  for (auto& [t, table] : kept_) {
    const bool deciding = table.cache->Claimed(table.claim);
    if (deciding && !table.deciding) Adopt(table);
    table.deciding = deciding;
  }
  AppendLookups(graph_, tables_, inputs, trace_, &computed);
  // Each access's memory (its sketch block, its index entry) is asked for a few accesses ahead.
  constexpr size_t kAhead = 8;
  auto table_of = [&](uint64_t key) -> Table* {
    const auto t = static_cast<size_t>(key >> 48);
    Table* table = t < kept_by_index_.size() ? kept_by_index_[t] : nullptr;
    return table && table->deciding ? table : nullptr;
  };
  for (size_t i = 0; i < trace_.size(); ++i) {
    if (i + kAhead < trace_.size()) {
      const uint64_t ahead = trace_[i + kAhead];
      if (Table* t = table_of(ahead)) t->policy->Prefetch(ahead & kRowMask);
    }
    Table* table = table_of(trace_[i]);
    if (!table) continue;
    ++table->stats.lookups;
    if (table->policy->Access(trace_[i] & kRowMask)) ++table->stats.hits;
  }
  // Each table's changes applied side by side: a cache that evicts waits for the runs reading it
  // (the grace period, backend/table_cache.h), and those waits overlap instead of adding up.
  std::vector<Table*> changed;
  for (auto& [t, table] : kept_) {
    if (table.policy->has_changes()) changed.push_back(&table);
  }
  std::vector<std::future<Status>> others;
  for (size_t i = 1; i < changed.size(); ++i)
    others.push_back(std::async(std::launch::async, [this, table = changed[i]] { return ApplyChanges(*table); }));
  Status status = changed.empty() ? Status::Ok() : ApplyChanges(*changed.front());
  for (std::future<Status>& other : others) {
    Status applied = other.get();
    if (!applied.ok() && status.ok()) status = applied;
  }
  changed_since_save_ = changed_since_save_ || !changed.empty();
  return status;
}

Status CacheKeeper::ApplyChanges(Table& table) {
  std::vector<TableCache::Fill> fills;
  for (const CachePolicy::Change& c : table.policy->TakeChanges()) {
    fills.push_back({c.slot, static_cast<int64_t>(c.key)});
    table.stats.evicted += c.evicted.has_value();
  }
  table.stats.inserted += fills.size();
  table.stats.cached = table.policy->size();
  return fills.empty() ? Status::Ok() : table.cache->Apply(fills, table.claim);
}

std::vector<TableCacheStats> CacheKeeper::TableStats() const {
  std::vector<TableCacheStats> stats;
  for (const auto& [t, table] : kept_) stats.push_back(table.stats);
  return stats;
}

}  // namespace rankd
