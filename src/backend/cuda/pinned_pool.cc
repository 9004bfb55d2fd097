#include "backend/cuda/pinned_pool.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <bit>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/settings.h"

namespace rankd::cuda {
namespace {

std::atomic<bool> started{false};

}  // namespace

PinnedPool& PinnedPool::Shared() {
  static PinnedPool* pool = [] {
    const int64_t mb = PinnedPoolMb();
    auto* p = new PinnedPool(static_cast<size_t>(mb) << 20);  // lives as long as the process
    if (mb > 0) SetHostAllocator(p);
    started.store(true);
    return p;
  }();
  return *pool;
}

bool PinnedPool::Started() { return started.load(); }

int PinnedPool::SizeShift(size_t bytes) {
  return std::max(kMinShift, static_cast<int>(std::bit_width(std::max<size_t>(bytes, 1) - 1)));
}

void* PinnedPool::NewSlab(size_t bytes) {
  // cudaHostAlloc may synchronise the device, which breaks another thread's capture: only when
  // none is being recorded, and never waiting for one.
  AllCaptureGates gates(std::try_to_lock);
  if (!gates.owns() || slab_total_.load(std::memory_order_relaxed) + bytes > limit_) return nullptr;
  void* p = nullptr;
  if (cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  void* device = nullptr;  // kernels read the tensors at their host address (unified addressing)
  if (cudaHostGetDevicePointer(&device, p, 0) != cudaSuccess || device != p) {
    cudaGetLastError();
    cudaFreeHost(p);
    return nullptr;
  }
  slab_total_.fetch_add(bytes, std::memory_order_relaxed);
  std::lock_guard<std::shared_mutex> lock(slabs_mu_);
  const auto begin = reinterpret_cast<uintptr_t>(p);
  slabs_.insert(std::upper_bound(slabs_.begin(), slabs_.end(), std::make_pair(begin, uintptr_t{0})),
                {begin, begin + bytes});
  return p;
}

void* PinnedPool::Allocate(size_t bytes) {
  const int shift = SizeShift(bytes);
  if (shift > kMaxShift || limit_ == 0) return nullptr;
  if (void* p = free_.Take(shift)) return p;
  // None free: a new slab carved into blocks of this size, the first handed out and the rest given
  // to this thread's shard. One slab at a time: another thread's may have come meanwhile.
  MutexLock lock(mu_);
  if (void* p = free_.Take(shift)) return p;
  const size_t block = size_t{1} << shift, slab = std::max(block, size_t{1} << kSlabShift);
  auto* p = static_cast<uint8_t*>(NewSlab(slab));
  if (!p) return nullptr;
  std::vector<void*> rest;
  for (size_t at = slab; at > block; at -= block) rest.push_back(p + at - block);  // the second block last
  free_.Give(shift, rest);
  return p;
}

void PinnedPool::Free(void* p, size_t bytes) { free_.Give(SizeShift(bytes), p); }

bool PinnedPool::Holds(const void* p, size_t bytes) const {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  std::shared_lock<std::shared_mutex> lock(slabs_mu_);
  auto it = std::upper_bound(slabs_.begin(), slabs_.end(), std::make_pair(begin, UINTPTR_MAX));
  if (it == slabs_.begin()) return false;
  --it;
  return begin >= it->first && begin + bytes <= it->second;
}

}  // namespace rankd::cuda
