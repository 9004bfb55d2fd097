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

Status MirroredTableCache::Apply(std::span<const Fill> fills) {
  Status first;
  bool took = false;
  for (size_t i = 0; i < caches_.size(); ++i) {
    Status applied = caches_[i]->Apply(fills);
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
