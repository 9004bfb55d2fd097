#include "common/sharded_free_lists.h"

#include <algorithm>
#include <atomic>

#include "rankd/status.h"

namespace rankd {
namespace {

// Each thread's number, in the order threads first ask: consecutive threads land on different shards.
size_t ThreadNumber() {
  static std::atomic<size_t> next{0};
  thread_local const size_t number = next.fetch_add(1, std::memory_order_relaxed);
  return number;
}

}  // namespace

ShardedFreeLists::ShardedFreeLists(int shards, int max_shift) : max_shift_(max_shift) {
  RANKD_CHECK(max_shift >= 0 && max_shift < 64);
  for (int i = 0; i < std::max(1, shards); ++i) {
    auto shard = std::make_unique<Shard>();
    MutexLock lock(shard->mu);
    shard->free.resize(static_cast<size_t>(max_shift) + 1);
    shards_.push_back(std::move(shard));
  }
}

size_t ShardedFreeLists::ThreadShard() const { return ThreadNumber() % shards_.size(); }

void* ShardedFreeLists::Take(int shift) {
  RANKD_CHECK(shift >= 0 && shift <= max_shift_);
  const auto s = static_cast<size_t>(shift);
  const size_t mine = ThreadShard();
  Shard& own = *shards_[mine];
  {
    MutexLock lock(own.mu);
    if (!own.free[s].empty()) {
      void* block = own.free[s].back();
      own.free[s].pop_back();
      return block;
    }
  }
  // None here: half of the first other shard's that has some (blocks freed on other threads
  // gather there), so that the next few takes find theirs at home.
  for (size_t i = 1; i < shards_.size(); ++i) {
    Shard& other = *shards_[(mine + i) % shards_.size()];
    std::vector<void*> taken;
    {
      MutexLock lock(other.mu);
      std::vector<void*>& list = other.free[s];
      if (list.empty()) continue;
      const size_t n = (list.size() + 1) / 2;
      taken.assign(list.end() - static_cast<std::ptrdiff_t>(n), list.end());
      list.resize(list.size() - n);
    }
    void* block = taken.back();
    taken.pop_back();
    if (!taken.empty()) Give(shift, taken);
    return block;
  }
  return nullptr;
}

void ShardedFreeLists::Give(int shift, std::span<void* const> blocks) {
  RANKD_CHECK(shift >= 0 && shift <= max_shift_);
  Shard& own = *shards_[ThreadShard()];
  MutexLock lock(own.mu);
  std::vector<void*>& list = own.free[static_cast<size_t>(shift)];
  list.insert(list.end(), blocks.begin(), blocks.end());
}

size_t ShardedFreeLists::FreeBlocks(int shift) const {
  RANKD_CHECK(shift >= 0 && shift <= max_shift_);
  size_t total = 0;
  for (const auto& shard : shards_) {
    MutexLock lock(shard->mu);
    total += shard->free[static_cast<size_t>(shift)].size();
  }
  return total;
}

}  // namespace rankd
