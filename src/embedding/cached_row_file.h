// CachedRowFile: a host-memory cache of a table's rows in front of the file that holds them all
// (the SSD tier's host level, docs/embedding.md, "Rows on disk").
//
// Read(ids, out) gives every row, always the file's: rows the cache holds are copied from it, the
// others read from the file in one batch (RowFile) straight into `out`. After the read the missed
// rows are offered to the cache, whose policy is the GPU cache's (CachePolicy: W-TinyLFU, a row
// admitted only if seen more often than the row it would evict), so the host budget holds the hot
// rows and a scan of cold ones cannot flush them. Nothing defaults: a row the cache does not admit
// is still read for its batch. The cache's memory is `capacity` rows, allocated at construction
// (the host budget is real: the file is read with O_DIRECT, so the page cache holds no second copy).
//
// A cache starts warm from the rows a previous run held (its Snapshot then, Admit now), while
// batches are served.
//
// Thread-safe. The cache's lock is not held while the file is read: batches that hit run beside one
// that waits for the disk.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "common/latency_histogram.h"
#include "common/mutex.h"
#include "embedding/cache_policy.h"
#include "embedding/row_file.h"
#include "rankd/status.h"

namespace rankd {

struct CachedRowFileStats {
  uint64_t lookups = 0;    // rows asked for
  uint64_t hits = 0;       // of those, copied from the cache
  uint64_t inserted = 0;   // rows admitted into the cache
  uint64_t evicted = 0;    // rows they replaced
  uint64_t warmed = 0;     // rows moved in by Admit (a warm start; not counted as inserted)
  LatencyHistogram reads;  // the file reads of Reads' misses, one per Read that missed
};

// The shard of `row` among a table's `shards` host caches (a power of two; embedding/disk_tables.h
// keeps a table's cache in shards, each over its own descriptor of the file): rows scattered by a
// multiplicative hash.
inline size_t RowShard(int64_t row, size_t shards) {
  return shards == 1 ? 0 : static_cast<size_t>((static_cast<uint64_t>(row) * 0x9E3779B97F4A7C15ull) >> 61) % shards;
}

class CachedRowFile {
 public:
  // `capacity` rows of host memory for the cache (at least 1).
  static StatusOr<std::unique_ptr<CachedRowFile>> Create(std::unique_ptr<RowFile> file, int64_t capacity);

  // As RowFile::Read: row ids[i] into out + i * row_bytes.
  Status Read(std::span<const int64_t> ids, void* out);

  // The cached rows with their estimated counts (0-255), in no order: this cache's part of a
  // hotness snapshot (embedding/hotness_snapshot.h).
  std::vector<std::pair<uint64_t, int>> Snapshot() const;
  // Rows for this many more in the cache.
  int64_t room() const;
  // Moves rows a previous run held into empty slots (a warm start: embedding/host_cache_hotness.h):
  // `rows`, ascending row ids each with the count a snapshot saved, whose bytes the caller read from
  // the file to `bytes[i]`. Rows cached already are skipped, and so are those past the room left
  // (rows the batches inserted meanwhile take it first); their counts are raised so that the first
  // misses do not evict them. Returns the rows moved in.
  int64_t Admit(std::span<const std::pair<uint64_t, int>> rows, std::span<const uint8_t* const> bytes);

  CachedRowFileStats stats() const;
  int64_t cached_rows() const;
  int64_t capacity() const { return capacity_; }
  // The host memory the cache holds: its rows and its policy's bookkeeping.
  size_t host_bytes() const;
  const RowFile& file() const { return *file_; }

 private:
  CachedRowFile(std::unique_ptr<RowFile> file, int64_t capacity, std::unique_ptr<uint8_t[]> slots);

  const std::unique_ptr<RowFile> file_;
  const int64_t capacity_;
  const size_t row_bytes_;
  mutable Mutex mu_;
  CachePolicy policy_ RANKD_GUARDED_BY(mu_);
  const std::unique_ptr<uint8_t[]> slots_;  // [capacity, row_bytes]; a slot is written under mu_
  CachedRowFileStats stats_ RANKD_GUARDED_BY(mu_);
};

}  // namespace rankd
