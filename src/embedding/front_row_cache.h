// FrontRowCache: a cache in front of a table's host cache (the GPU cache of a table on disk,
// embedding/gpu_row_tier.h), as the host caches' hotness snapshot (embedding/host_cache_hotness.h)
// saves and warms it. Its rows are the table's hottest, and the host cache, which no longer sees
// their lookups, lets them go: the snapshot keeps them apart, ahead of the host cache's.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace rankd {

class FrontRowCache {
 public:
  virtual ~FrontRowCache() = default;
  // Rows it holds at most.
  virtual int64_t capacity() const = 0;
  // Whether it holds `row` now.
  virtual bool Holds(int64_t row) const = 0;
  // The rows it holds with their counts, most frequent first.
  virtual std::vector<std::pair<uint64_t, int>> Snapshot() const = 0;
  // Rows a previous run's cache held (most frequent first, with their counts) to move in, at most
  // capacity() of them; the table's host cache holds them by now.
  virtual void WarmFrom(std::vector<std::pair<uint64_t, int>> hottest) = 0;
  // Rows moved in and out so far (a save is due when it changed).
  virtual uint64_t changes() const = 0;
};

}  // namespace rankd
