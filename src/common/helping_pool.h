// HelpingPool: a few threads that help a caller through independent items of host work (packing a
// GPU batch's inputs, building its ragged offsets) without ever making it wait for them.
//
// Run(n, fn) publishes the items and works through them itself; helpers that are awake take items
// too, each claimed once. The caller waits only for items a helper has already started, so a
// sleeping or descheduled helper costs nothing: the worst case is the caller alone. Helpers spin
// for a while after their last job (requests arriving back to back find them awake), then sleep
// until the next Run. This is what OpenMP's pool did not give the request path: with its passive
// wait, packing W1's 512 pairs on it averaged 0.15 to 0.5 ms with stalls of milliseconds, where
// the calling thread alone took 0.09 (docs/log/benchmarks.md). Thread-safe: when several callers run
// at once the latest job gets the helpers, and every caller finishes its own items.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/mutex.h"

namespace rankd {

class HelpingPool {
 public:
  // `helpers` threads (0: every Run is the caller's alone), each spinning `spin` after a job.
  HelpingPool(int helpers, std::chrono::microseconds spin);
  ~HelpingPool();
  HelpingPool(const HelpingPool&) = delete;
  HelpingPool& operator=(const HelpingPool&) = delete;

  // fn(i) for each i in [0, n), on the caller and any helper awake; returns when all have run.
  template <typename F>
  void Run(int64_t n, F&& fn) {
    if (n <= 0) return;
    auto call = [](void* f, int64_t i) { (*static_cast<std::remove_reference_t<F>*>(f))(i); };
    RunErased(n, call, static_cast<void*>(&fn));
  }

  int helpers() const { return static_cast<int>(threads_.size()); }

  // The process's pool for the request path: SetSharedHelpers's count (default: 3, at most the
  // cores the process may run on but one: common/usable_cores.h), each spinning 2 ms after a job.
  static HelpingPool& Shared();
  // The shared pool's helpers (0-64), before it starts; false once it runs with another count.
  static bool SetSharedHelpers(int helpers);

 private:
  struct Job {
    int64_t n = 0;
    void (*call)(void*, int64_t) = nullptr;
    void* fn = nullptr;
    std::atomic<int64_t> next{0};  // the next item to claim
    std::atomic<int64_t> done{0};  // items run
    void Work();                   // claims and runs items until none is left
  };
  void RunErased(int64_t n, void (*call)(void*, int64_t), void* fn);
  void Help();

  std::chrono::microseconds spin_;
  Mutex job_mu_;                                        // guards job_ (a shared_ptr is not atomic)
  std::shared_ptr<Job> job_ RANKD_GUARDED_BY(job_mu_);  // the latest job published
  std::atomic<uint64_t> published_{0};                  // counts jobs published; helpers wait on it
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace rankd
