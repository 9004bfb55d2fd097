#include "common/helping_pool.h"

#include <algorithm>
#include <atomic>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common/thread_name.h"
#include "common/usable_cores.h"

namespace rankd {
namespace {

void Pause() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

void HelpingPool::Job::Work() {
  for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < n;
       i = next.fetch_add(1, std::memory_order_relaxed)) {
    call(fn, i);
    done.fetch_add(1, std::memory_order_release);
  }
}

HelpingPool::HelpingPool(int helpers, std::chrono::microseconds spin) : spin_(spin) {
  for (int t = 0; t < helpers; ++t) {
    threads_.emplace_back([this] {
      NameThisThread("rankd-help");
      Help();
    });
  }
}

HelpingPool::~HelpingPool() {
  stop_.store(true);
  published_.fetch_add(1, std::memory_order_release);
  published_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void HelpingPool::RunErased(int64_t n, void (*call)(void*, int64_t), void* fn) {
  if (threads_.empty() || n == 1) {
    for (int64_t i = 0; i < n; ++i) call(fn, i);
    return;
  }
  auto job = std::make_shared<Job>();
  job->n = n;
  job->call = call;
  job->fn = fn;
  {
    MutexLock lock(job_mu_);
    job_ = job;
  }
  published_.fetch_add(1, std::memory_order_release);
  published_.notify_all();
  job->Work();
  // Items left are running on helpers that claimed them: they are as short as the caller's.
  while (job->done.load(std::memory_order_acquire) < n) Pause();
  MutexLock lock(job_mu_);
  if (job_ == job) job_.reset();  // helpers that hold it still find nothing left to claim
}

void HelpingPool::Help() {
  uint64_t seen = 0;
  auto idle_since = std::chrono::steady_clock::now();
  for (int spins = 0; !stop_.load(std::memory_order_relaxed);) {
    const uint64_t published = published_.load(std::memory_order_acquire);
    if (published == seen) {
      if (++spins % 64 != 0 || std::chrono::steady_clock::now() - idle_since < spin_) {
        Pause();
      } else {
        published_.wait(seen, std::memory_order_acquire);  // until the next job (or the end)
      }
      continue;
    }
    seen = published;
    std::shared_ptr<Job> job;
    {
      MutexLock lock(job_mu_);
      job = job_;
    }
    if (job) job->Work();
    idle_since = std::chrono::steady_clock::now();
    spins = 0;
  }
}

namespace {

std::atomic<int> shared_helpers{-1};  // -1: one fewer than the cores, at most 3
std::atomic<bool> shared_started{false};

}  // namespace

bool HelpingPool::SetSharedHelpers(int helpers) {
  if (shared_started.load()) return helpers == Shared().helpers();
  shared_helpers.store(std::clamp(helpers, 0, 64));
  return true;
}

HelpingPool& HelpingPool::Shared() {
  static HelpingPool pool(
      [] {
        shared_started.store(true);
        if (shared_helpers.load() >= 0) return shared_helpers.load();
        return std::clamp(UsableCores() - 1, 0, 3);
      }(),
      std::chrono::microseconds(2000));
  return pool;
}

}  // namespace rankd
