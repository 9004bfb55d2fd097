// PinnedPool: page-locked, mapped host memory for request tensors (common/host_allocator.h), which
// kernels read where it lies. With it installed a small run's inputs need no packing on the host:
// the input kernel reads each straight from the request's tensors (mapped_copy.h).
//
// Blocks come in power-of-two sizes from 256 bytes to 64 MiB, carved from 2 MiB slabs (or given a
// slab of their own above 1 MiB) and kept on free lists per size when freed, sharded so that the
// frontends' threads do not contend for one lock (common/sharded_free_lists.h); slabs are never
// returned. The pool stops growing at RANKD_PINNED_POOL_MB (default 2048; 0 turns the pool off)
// and then, as for larger blocks, leaves the heap to serve. A slab is made with cudaHostAlloc only
// when no capture is being recorded on any device (AllCaptureGates), so the pool never waits for one and never
// breaks one: a request that finds a capture under way takes heap memory instead. Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "common/host_allocator.h"
#include "common/mutex.h"
#include "common/sharded_free_lists.h"

namespace rankd::cuda {

class PinnedPool final : public HostAllocator {
 public:
  // The process's pool, installed as the request tensors' host allocator on first use (unless
  // its size, settings.h's PinnedPoolMb, is 0).
  static PinnedPool& Shared();
  // Whether Shared() has made the pool.
  static bool Started();

  void* Allocate(size_t bytes) override;
  void Free(void* p, size_t bytes) override;
  MemoryLocation location() const override { return MemoryLocation::Pinned(); }
  size_t reserved_bytes() const override { return slab_total_.load(std::memory_order_relaxed); }
  // Whether [p, p + bytes) lies in one of the pool's slabs, where kernels can read it at p (tests
  // check with it that a tensor located kPinned is).
  bool Holds(const void* p, size_t bytes) const;

 private:
  explicit PinnedPool(size_t limit) : limit_(limit) {}
  // nullptr when over the limit, during a capture, or on failure.
  void* NewSlab(size_t bytes) RANKD_REQUIRES(mu_);
  static int SizeShift(size_t bytes);  // the block size a request of `bytes` takes, as a power of two

  static constexpr int kMinShift = 8, kSlabShift = 21, kMaxShift = 26, kShards = 16;
  const size_t limit_;
  ShardedFreeLists free_{kShards, kMaxShift};
  Mutex mu_;  // taken to make a slab
  mutable std::shared_mutex slabs_mu_;
  std::vector<std::pair<uintptr_t, uintptr_t>> slabs_;  // [begin, end), sorted
  std::atomic<size_t> slab_total_{0};                   // changed under mu_, read anywhere
};

}  // namespace rankd::cuda
