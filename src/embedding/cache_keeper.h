// CacheKeeper: decides which rows each of a model's table caches holds, and puts them there, off
// the request path (docs/embedding.md).
//
// Each run offers its inputs (Offer). When the keeper is not behind, the ids that feed lookups of
// cached tables are copied (every k-th row of each from a row that moves from offer to offer, at
// most `sample_ids` ids in all) and the call returns; the keeper's own thread turns them into the rows they read
// (AppendLookups), feeds them to each table's CachePolicy (TinyLFU admission, sampled eviction) and
// hands the policy's insertions to the device cache (TableCache::Apply), which moves rows in
// without a lookup ever reading a slot while its row changes. A cache with room for every row of its
// table is filled with all of them when the keeper starts. When the keeper is behind, offers
// are dropped: the policy sees a sample of the traffic, which keeps its frequencies. Lookups never
// wait for the keeper: a row it has not cached yet is read from host memory. A cache that another
// version of the model made and still reads (a hot swap) is claimed: this keeper decides its rows
// from then on, starting from those it holds, and the other's changes nothing more. With a snapshot
// path, the caches start from the rows the previous run (or version) held, and the keeper saves them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/table_cache.h"
#include "common/mutex.h"
#include "embedding/cache_policy.h"
#include "embedding/lookup_sample.h"
#include "embedding/lookup_trace.h"
#include "embedding/table_budget.h"
#include "model/graph.h"
#include "rankd/tensor.h"

namespace rankd {

struct CacheKeeperOptions {
  // A hotness snapshot (hotness_snapshot.h) the caches start warm from when it exists, and that the
  // keeper writes every `save_every_s` seconds while rows change and when it stops. Empty: none.
  std::string snapshot_path;
  double save_every_s = 60;
  int max_pending = 4;  // offers queued before more are dropped
  // Ids copied from one offer, at most: enough that a large cache fills and follows its hot rows
  // at the keeper's own rate (the policy takes ~0.1 µs an id), since offers past its rate are
  // dropped before anything is copied.
  int64_t sample_ids = 1 << 18;
  // Once the caches are filled at start, the keeper's thread runs at idle priority, only on cores
  // no request wants (common/idle_priority.h); false keeps it at normal priority.
  bool idle_priority = true;
  // Runs one node on the CPU (compile/evaluate.h's EvaluateNode): with it, ids the graph computes from inputs and
  // constants (Mod, Cast, Clip, a cross of features, ...) are computed from the sampled inputs and traced
  // (lookup_trace.h's FindComputedIds); without it, such lookups are not.
  NodeEvaluator evaluate_node;
};

// A table cache's counts since the keeper started.
struct TableCacheStats {
  std::string table;
  int64_t capacity = 0;           // slots
  int64_t cached = 0;             // rows held now
  uint64_t lookups = 0;           // sampled lookups the policy saw
  uint64_t hits = 0;              // of which the row was cached
  uint64_t inserted = 0;          // rows moved into the cache
  uint64_t evicted = 0;           // rows that left it
  uint64_t dropped_offers = 0;    // runs not sampled (the keeper was behind); the model's, in every table
  TableCache::Gathered gathered;  // the cache's misses gathered by the host, or not (TableCache::gathered)
};

class CacheKeeper {
 public:
  // Keeps `caches` (by table value id, as ModelResources::table_caches gives them) of `graph`'s
  // tables; `graph` outlives the keeper, and so do the caches.
  CacheKeeper(const Graph& graph, const std::map<int, TableCache*>& caches, CacheKeeperOptions options = {});
  ~CacheKeeper();
  CacheKeeper(const CacheKeeper&) = delete;
  CacheKeeper& operator=(const CacheKeeper&) = delete;

  // A run's inputs, in graph input order (Offer copies what it keeps).
  void Offer(std::span<const Tensor> graph_inputs);
  // Returns once every offer taken so far has been applied to the caches; the first error the
  // device side returned since the last call, if any.
  Status Flush();
  std::vector<TableCacheStats> stats() const;

 private:
  struct Table {
    TableCache* cache = nullptr;
    uint64_t claim = 0;     // TableCache::Claim's
    bool deciding = false;  // the claim decides the cache's rows (the keeper thread's, after the start)
    uint64_t seed = 0;      // the policy's
    std::unique_ptr<CachePolicy> policy;
    TableCacheStats stats;
  };
  void Loop();
  // A new policy for `table` holding the rows its cache holds (CachePolicy::Adopt).
  void Adopt(Table& table);
  Status FillWholeTables();
  // From the snapshot: each table's saved rows (those still within the table) into its cache.
  Status WarmStart();
  // The policies' cached rows with their counts, hottest first, to the snapshot file.
  Status SaveSnapshot();
  // tables_' names, as the snapshot names RowKey's table index.
  std::vector<std::string> TableNames() const;
  // Feeds one offer's lookups to the policies and applies their changes.
  Status Keep(const std::vector<Tensor>& inputs);
  // The table's policy's queued changes, applied to its cache and counted.
  Status ApplyChanges(Table& table);
  // Each kept table's counts (the keeper thread's; published under mu_).
  std::vector<TableCacheStats> TableStats() const;

  const Graph& graph_;
  const CacheKeeperOptions options_;
  std::vector<TableInfo> tables_;      // FindTables(graph_): RowKey's table index
  std::map<int, Table> kept_;          // by index in tables_
  std::vector<Table*> kept_by_index_;  // kept_'s tables by index in tables_ (null: not kept)
  LookupSampling sampling_;            // what an offer's sample copies (lookup_sample.h)
  bool computed_failed_ = false;       // the keeper thread's: an evaluation failed (logged once)
  std::vector<uint64_t> trace_;        // the keeper thread's
  std::atomic<uint64_t> offers_{0};    // sampled so far (where the next sample starts)
  bool changed_since_save_ = false;    // the keeper thread's

  mutable Mutex mu_;
  std::condition_variable changed_;
  std::deque<std::vector<Tensor>> pending_ RANKD_GUARDED_BY(mu_);
  bool busy_ RANKD_GUARDED_BY(mu_) = false;
  bool stop_ RANKD_GUARDED_BY(mu_) = false;
  uint64_t dropped_ RANKD_GUARDED_BY(mu_) = 0;
  Status error_ RANKD_GUARDED_BY(mu_);
  std::vector<TableCacheStats> published_ RANKD_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace rankd
