// Table caches shared by the versions of a model that read the same table.
//
// A version loaded beside the one it replaces holds its unchanged tables in the replaced one's host
// storage (compile/shared_constants.h), so its cache of such a table would cache the same rows: it
// takes the serving version's cache instead of a second one. The swap then needs no device memory
// for that cache, and the new version starts with the rows the serving one holds now, not with an
// empty cache (or a snapshot minutes old). Its keeper claims the cache (TableCache::Claim) and
// decides its rows from then on; the old version's runs still read it, and its Applies wait for
// them (CudaRowCache::AddReaders). A cache is found by (group, GPU, host address, bytes, capacity)
// while the host storage's owner lives (Graph::StorageOwner), as shared device copies are: the
// group is the model's name, so distinct models that read one table keep caches of their own, each
// following its own traffic. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/cuda/row_cache.h"

namespace rankd::cuda {

struct RowCacheKey {
  std::string group;  // the model's name; empty: never shared
  int device = 0;
  const void* host = nullptr;  // the table's host storage
  size_t bytes = 0;
  int64_t capacity = 0;
};

// The cache a model of `key.group` made for that table and some model still holds, if any.
std::shared_ptr<CudaRowCache> FindRowCache(const RowCacheKey& key, const std::shared_ptr<const void>& owner);
// Offers `cache` (of that table) to later loads, held weakly.
void OfferRowCache(const RowCacheKey& key, const std::shared_ptr<const void>& owner,
                   const std::shared_ptr<CudaRowCache>& cache);

}  // namespace rankd::cuda
