#include "backend/cuda/shared_row_caches.h"

#include <map>
#include <tuple>

#include "common/mutex.h"

namespace rankd::cuda {
namespace {

struct Offered {
  std::weak_ptr<const void> owner;
  std::weak_ptr<CudaRowCache> cache;
};

using Key = std::tuple<std::string, int, const void*, size_t, int64_t>;

Key KeyOf(const RowCacheKey& k) { return {k.group, k.device, k.host, k.bytes, k.capacity}; }

Mutex mu;
std::map<Key, Offered>& OfferedCaches() RANKD_REQUIRES(mu) {
  static auto* offered = new std::map<Key, Offered>;  // lives past static destruction
  return *offered;
}

}  // namespace

std::shared_ptr<CudaRowCache> FindRowCache(const RowCacheKey& key, const std::shared_ptr<const void>& owner) {
  if (!owner || key.group.empty()) return nullptr;
  MutexLock lock(mu);
  auto& offered = OfferedCaches();
  auto it = offered.find(KeyOf(key));
  if (it == offered.end()) return nullptr;
  std::shared_ptr<const void> theirs = it->second.owner.lock();
  std::shared_ptr<CudaRowCache> cache = it->second.cache.lock();
  if (!cache || theirs != owner) {
    if (!cache || !theirs) offered.erase(it);  // gone: its address may come back holding other bytes
    return nullptr;
  }
  return cache;
}

void OfferRowCache(const RowCacheKey& key, const std::shared_ptr<const void>& owner,
                   const std::shared_ptr<CudaRowCache>& cache) {
  if (!owner || !cache || key.group.empty()) return;
  MutexLock lock(mu);
  auto& offered = OfferedCaches();
  std::erase_if(offered, [](const auto& entry) { return entry.second.cache.expired(); });
  offered[KeyOf(key)] = Offered{owner, cache};
}

}  // namespace rankd::cuda
