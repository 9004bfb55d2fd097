// OwnerKeyedOffers: things one model made that a later model may take instead of making its own
// (a device copy of a table, a table's GPU cache), held weakly and found by key while the host
// storage they were made from lives (its owner, Graph::StorageOwner): an entry whose thing or owner
// is gone is dropped, since its address may come back holding other bytes. Thread-safe.
#pragma once

#include <map>
#include <memory>

#include "common/mutex.h"

namespace rankd {

template <typename Key, typename T>
class OwnerKeyedOffers {
 public:
  // What was offered under `key` for `owner`, if something still holds it; else null.
  std::shared_ptr<T> Find(const Key& key, const std::shared_ptr<const void>& owner) {
    if (!owner) return nullptr;
    MutexLock lock(mu_);
    auto it = offered_.find(key);
    if (it == offered_.end()) return nullptr;
    std::shared_ptr<const void> theirs = it->second.owner.lock();
    std::shared_ptr<T> thing = it->second.thing.lock();
    if (!thing || theirs != owner) {
      if (!thing || !theirs) offered_.erase(it);
      return nullptr;
    }
    return thing;
  }
  // Offers `thing` under `key` for `owner`, held weakly (nothing without an owner).
  void Offer(const Key& key, const std::shared_ptr<const void>& owner, const std::shared_ptr<T>& thing) {
    if (!owner || !thing) return;
    MutexLock lock(mu_);
    std::erase_if(offered_, [](const auto& entry) { return entry.second.thing.expired(); });
    offered_[key] = Offered{owner, thing};
  }

 private:
  struct Offered {
    std::weak_ptr<const void> owner;
    std::weak_ptr<T> thing;
  };
  Mutex mu_;
  std::map<Key, Offered> offered_ RANKD_GUARDED_BY(mu_);
};

}  // namespace rankd
