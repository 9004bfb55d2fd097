// CompletionPoller: one thread that finds out when work is done, for many threads that wait for it
// asleep. Each waiting thread hands over a poll (on a GPU, a query of an event recorded after its
// run: `--cuda device_wait=poller`, docs/cuda.md) and the time worth polling from; the poller's
// thread sleeps until the earliest such time, then polls every due wait once a step, sleeping a
// step between rounds, and wakes each thread whose poll comes back true.
//
// Why: a thread that waits for its own run alone must either spin near the run's end (a core a
// run in flight: under served load, a fifth to a quarter of rankd's CPU) or be woken by the
// driver's interrupt (which ends runs 0.05-0.1 ms later). With one poller, eight runs in flight
// cost one thread waking once a step, and each waiter sleeps on a futex it is woken from at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace rankd {

class CompletionPoller {
 public:
  using Clock = std::chrono::steady_clock;

  // Polls every `step` while some wait is due. `setup` runs once on the poller's thread before
  // anything else (a CUDA device made current there).
  explicit CompletionPoller(std::chrono::nanoseconds step, std::function<void()> setup = {});
  CompletionPoller(const CompletionPoller&) = delete;
  CompletionPoller& operator=(const CompletionPoller&) = delete;
  // Joins the thread. No Wait may be in progress.
  ~CompletionPoller();

  // Blocks the calling thread until `done` returns true. `done` is called on the poller's thread
  // only, first at `first_poll` (at once if that has passed), then once every step; it must not
  // block. Returns whether its first call already returned true (the wait began too late: a
  // caller estimating `first_poll` may then wait less the next time).
  bool Wait(const std::function<bool()>& done, Clock::time_point first_poll);

  // Waits in progress.
  size_t Pending() const;

 private:
  struct Waiter {
    const std::function<bool()>* done = nullptr;
    Clock::time_point first_poll;
    bool polled = false;         // the poller's thread only, until released
    bool done_at_first = false;  // likewise
    // 0 waiting, 1 done (the poller is waking the thread), 2 released: the poller no longer
    // touches the waiter, whose thread may then return (and free it).
    std::atomic<uint32_t> state{0};
  };

  void Loop();

  const std::chrono::nanoseconds step_;
  mutable Mutex mu_;
  std::condition_variable wake_;
  std::vector<Waiter*> pending_ RANKD_GUARDED_BY(mu_);
  // While the poller sleeps until the next first poll: when it wakes (max: none pending). While it
  // polls (or sleeps a step between rounds): min, so a new wait need not wake it.
  Clock::time_point sleeping_until_ RANKD_GUARDED_BY(mu_) = Clock::time_point::min();
  bool stop_ RANKD_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace rankd
