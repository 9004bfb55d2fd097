#include "runtime/mirrored_table_cache.h"

namespace rankd {

MirroredTableCache::MirroredTableCache(std::vector<TableCache*> caches) : caches_(std::move(caches)) {}

TableCache::Gathered MirroredTableCache::gathered() const {
  Gathered all;
  for (const TableCache* c : caches_) {
    const Gathered one = c->gathered();
    all.staged += one.staged, all.unstaged += one.unstaged;
    all.seconds += one.seconds;
  }
  return all;
}

uint64_t MirroredTableCache::Claim() {
  std::vector<uint64_t>& mine = claims_[next_claim_];
  for (TableCache* c : caches_) mine.push_back(c->Claim());
  return next_claim_++;
}

void MirroredTableCache::Release(uint64_t claim) {
  auto it = claims_.find(claim);
  if (it == claims_.end()) return;
  for (size_t i = 0; i < caches_.size(); ++i) caches_[i]->Release(it->second[i]);
  claims_.erase(it);
}

bool MirroredTableCache::Claimed(uint64_t claim) const {
  auto it = claims_.find(claim);
  if (it == claims_.end()) return claims_.empty();
  for (size_t i = 0; i < caches_.size(); ++i) {
    if (!caches_[i]->Claimed(it->second[i])) return false;
  }
  return true;
}

Status MirroredTableCache::Apply(std::span<const Fill> fills, uint64_t claim) {
  auto it = claims_.find(claim);
  Status first;
  bool took = false;
  for (size_t i = 0; i < caches_.size(); ++i) {
    Status applied = caches_[i]->Apply(fills, it == claims_.end() ? 0 : it->second[i]);
    if (applied.ok() && !took) {
      source_ = i;
      took = true;
    } else if (!applied.ok() && first.ok()) {
      first = applied;
    }
  }
  return took ? Status::Ok() : first;
}

}  // namespace rankd
