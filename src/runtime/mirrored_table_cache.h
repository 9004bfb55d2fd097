// MirroredTableCache: one table's caches on every replica of a model (docs/replicas.md), kept
// alike as one: the cache keeper (embedding/cache_keeper.h) decides rows once, from the traffic of
// every replica, and each fill goes to every replica's cache, so each GPU's lookups hit the same
// rows. A replica whose cache cannot take a fill (its device failed) is left behind; the others go
// on, and the rows reported are those of the first cache that took the last fill.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "backend/table_cache.h"

namespace rankd {

class MirroredTableCache final : public TableCache {
 public:
  // `caches`: one per replica, equal in capacity, outliving this.
  explicit MirroredTableCache(std::vector<TableCache*> caches);

  int64_t capacity() const override { return caches_[0]->capacity(); }
  // Claims every cache (each may be shared with another version's replica on its GPU).
  uint64_t Claim() override;
  void Release(uint64_t claim) override;
  bool Claimed(uint64_t claim) const override;
  // Applies `fills` to every cache; fails (with the first cache's error) only when none took them.
  Status Apply(std::span<const Fill> fills, uint64_t claim) override;
  std::span<const int64_t> rows_of_slots() const override { return caches_[source_]->rows_of_slots(); }
  Gathered gathered() const override;  // every replica's

 private:
  std::vector<TableCache*> caches_;
  size_t source_ = 0;                                 // the first cache that took the last fills
  std::map<uint64_t, std::vector<uint64_t>> claims_;  // each claim's claims of caches_, in order
  uint64_t next_claim_ = 1;
};

}  // namespace rankd
