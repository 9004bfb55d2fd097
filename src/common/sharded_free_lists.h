// ShardedFreeLists: free blocks of power-of-two sizes, kept on lists split over shards with a lock
// each. A thread takes blocks from its own shard and gives freed ones back to it (threads are spread
// over the shards in the order they first come); a thread whose shard has none of a size takes half
// of another shard's. A pool of request tensors (backend/cuda/pinned_pool.h) allocates and frees a
// few dozen blocks per request from every frontend thread: under one lock for all of them, a
// 16-core server spent a third of its CPU contending for it (docs/log/benchmarks.md, "Replicas:
// the pinned pool's lock").
//
// The lists hold blocks, not memory: whoever made a block frees it. Thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "common/mutex.h"

namespace rankd {

class ShardedFreeLists {
 public:
  // Blocks of 1 << shift bytes for shift in [0, max_shift], over `shards` shards (at least 1).
  ShardedFreeLists(int shards, int max_shift);

  // A free block of 1 << shift bytes, the calling thread's shard's most recently given first, or
  // nullptr when no shard holds one.
  void* Take(int shift);
  // Blocks of 1 << shift bytes, freed, to the calling thread's shard.
  void Give(int shift, void* block) { Give(shift, std::span<void* const>(&block, 1)); }
  void Give(int shift, std::span<void* const> blocks);

  // Free blocks of 1 << shift bytes on every shard, summed.
  size_t FreeBlocks(int shift) const;
  int shards() const { return static_cast<int>(shards_.size()); }
  // The calling thread's shard.
  size_t ThreadShard() const;

 private:
  struct alignas(64) Shard {
    mutable Mutex mu;
    std::vector<std::vector<void*>> free RANKD_GUARDED_BY(mu);  // by size shift
  };
  std::vector<std::unique_ptr<Shard>> shards_;
  const int max_shift_;
};

}  // namespace rankd
