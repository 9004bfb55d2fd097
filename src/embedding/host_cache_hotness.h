// HostCacheHotness: the host caches of a model's tables on disk kept warm across runs.
//
// With a snapshot file named, the caches start from the rows the previous run held: at load a
// thread reads the file (embedding/hotness_snapshot.h: each table's rows found by its name), takes for each table the
// hottest rows each of its shards has room for, reads them from the table's file in file order (a hot set is scattered
// over the table: read in order, neighbours merge into long reads, on a descriptor and ring of its own so that the
// batches' misses do not queue behind it) and moves them in while batches are served. It then saves the caches' rows
// every `save_every_s` while they change, and once more when the tables go (the version unloads, the server stops). A
// missing file is a first run; a file that is not a snapshot is reported and the caches start cold; rows past a table's
// end are dropped.
//
// A table with a cache in front of its host cache (embedding/front_row_cache.h: a GPU cache) has that cache's rows
// saved too, ahead of the host caches' (they are the hottest, and the host cache, which no longer sees their lookups,
// lets them go): at the next load the host cache reads them first, and the cache in front is then handed the table's
// first rows (FrontRowCache::WarmFrom), which it moves in from the host cache.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "embedding/cached_row_file.h"
#include "embedding/front_row_cache.h"
#include "rankd/status.h"

namespace rankd {

class HostCacheHotness {
 public:
  // `tables[t]`: the host-cache shards (row r in shard RowShard(r, shards)) of the table named
  // `names[t]`, and `front[t]` the cache in front of it (null, or `front` empty: none); all must
  // outlive this. Starts the thread.
  HostCacheHotness(std::vector<std::string> names, std::vector<std::vector<CachedRowFile*>> tables, std::string path,
                   double save_every_s, std::vector<FrontRowCache*> front = {});
  ~HostCacheHotness();  // stops the warm start after its chunk in flight, then saves
  HostCacheHotness(const HostCacheHotness&) = delete;
  HostCacheHotness& operator=(const HostCacheHotness&) = delete;

  // Waits until the warm start has moved into the host caches what it will (and handed the caches
  // in front theirs).
  void WaitForWarmStart();
  // Saves the caches' rows now if they changed since the last save (or warm start).
  Status Save();
  // What the warm start has read from table t's file so far.
  RowFileStats reads(size_t t) const;

 private:
  void Loop();
  void WarmStart();
  // Table t's hottest rows its shards have room for, read and moved in.
  Status WarmTable(size_t t, const std::vector<std::pair<uint64_t, int>>& hottest);
  uint64_t Changes() const;  // rows inserted, evicted and moved in, over every shard and cache in front

  const std::vector<std::string> names_;
  const std::vector<std::vector<CachedRowFile*>> tables_;
  const std::vector<FrontRowCache*> front_;  // by table; null: none
  const std::string path_;
  const double save_every_s_;
  std::atomic<bool> stopping_{false};
  mutable Mutex reads_mu_;
  std::vector<RowFileStats> reads_ RANKD_GUARDED_BY(reads_mu_);  // per table
  Mutex save_mu_;                                                // one save at a time
  uint64_t saved_changes_ RANKD_GUARDED_BY(save_mu_) = 0;
  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ RANKD_GUARDED_BY(mu_) = false;
  bool warm_ RANKD_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace rankd
