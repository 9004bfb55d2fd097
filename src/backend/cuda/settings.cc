#include "backend/cuda/settings.h"

#include <atomic>
#include <mutex>

#include "backend/cuda/pinned_pool.h"
#include "common/mutex.h"

namespace rankd::cuda {
namespace {

std::atomic<bool> dependent_launches{true};
std::atomic<bool> gemm_log{false};
std::atomic<int> attention_strips{4};
std::atomic<int64_t> pinned_pool_mb{2048};
Mutex kernel_cache_mu;
std::string kernel_cache_dir RANKD_GUARDED_BY(kernel_cache_mu);

}  // namespace

void SetDependentLaunches(bool on) { dependent_launches.store(on, std::memory_order_relaxed); }
bool DependentLaunches() { return dependent_launches.load(std::memory_order_relaxed); }

void SetGemmLog(bool on) { gemm_log.store(on, std::memory_order_relaxed); }
bool GemmLog() { return gemm_log.load(std::memory_order_relaxed); }

void SetAttentionStrips(int strips) {
  attention_strips.store(strips == 1 || strips == 2 ? strips : 4, std::memory_order_relaxed);
}
int AttentionStrips() { return attention_strips.load(std::memory_order_relaxed); }

Status SetPinnedPoolMb(int64_t mb) {
  if (mb < 0) return InvalidArgument("the pinned pool's size must not be negative");
  if (PinnedPool::Started()) {
    if (mb == pinned_pool_mb.load()) return Status::Ok();
    return InvalidArgument("the pinned pool already exists: its size is set before the CUDA backend starts");
  }
  pinned_pool_mb.store(mb);
  return Status::Ok();
}
int64_t PinnedPoolMb() { return pinned_pool_mb.load(); }

void SetKernelCacheDir(const std::string& dir) {
  MutexLock lock(kernel_cache_mu);
  kernel_cache_dir = dir;
}
std::string KernelCacheDir() {
  MutexLock lock(kernel_cache_mu);
  return kernel_cache_dir;
}

}  // namespace rankd::cuda
