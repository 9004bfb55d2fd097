#include "backend/cuda/shared_row_caches.h"

#include <tuple>

#include "common/owner_keyed_offers.h"

namespace rankd::cuda {
namespace {

using Key = std::tuple<std::string, int, const void*, size_t, int64_t>;

Key KeyOf(const RowCacheKey& k) { return {k.group, k.device, k.host, k.bytes, k.capacity}; }

OwnerKeyedOffers<Key, CudaRowCache>& Offered() {
  static auto* offered = new OwnerKeyedOffers<Key, CudaRowCache>;  // lives past static destruction
  return *offered;
}

}  // namespace

std::shared_ptr<CudaRowCache> FindRowCache(const RowCacheKey& key, const std::shared_ptr<const void>& owner) {
  return key.group.empty() ? nullptr : Offered().Find(KeyOf(key), owner);
}

void OfferRowCache(const RowCacheKey& key, const std::shared_ptr<const void>& owner,
                   const std::shared_ptr<CudaRowCache>& cache) {
  if (!key.group.empty()) Offered().Offer(KeyOf(key), owner, cache);
}

}  // namespace rankd::cuda
