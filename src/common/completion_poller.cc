#include "common/completion_poller.h"

#include <sys/prctl.h>

#include <algorithm>

#include "common/thread_name.h"

namespace rankd {

CompletionPoller::CompletionPoller(std::chrono::nanoseconds step, std::function<void()> setup) : step_(step) {
  thread_ = std::thread([this, setup = std::move(setup)] {
    NameThisThread("rankd-poller");
    prctl(PR_SET_TIMERSLACK, 1000UL);  // sleeps end within 1 µs of asking, not 50
    if (setup) setup();
    Loop();
  });
}

CompletionPoller::~CompletionPoller() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

bool CompletionPoller::Wait(const std::function<bool()>& done, Clock::time_point first_poll) {
  Waiter waiter;
  waiter.done = &done;
  waiter.first_poll = first_poll;
  bool wake = false;
  {
    MutexLock lock(mu_);
    pending_.push_back(&waiter);
    wake = first_poll < sleeping_until_;  // asleep past this wait's first poll
  }
  if (wake) wake_.notify_one();
  waiter.state.wait(0, std::memory_order_acquire);
  while (waiter.state.load(std::memory_order_acquire) != 2) std::this_thread::yield();  // its wake-up's last µs
  return waiter.done_at_first;
}

size_t CompletionPoller::Pending() const {
  MutexLock lock(mu_);
  return pending_.size();
}

void CompletionPoller::Loop() {
  std::vector<Waiter*> due, finished;
  MutexLock lock(mu_);
  while (!stop_) {
    if (pending_.empty()) {
      sleeping_until_ = Clock::time_point::max();
      wake_.wait(lock.native());
      continue;
    }
    const Clock::time_point now = Clock::now();
    Clock::time_point earliest = Clock::time_point::max();
    for (const Waiter* w : pending_) earliest = std::min(earliest, w->first_poll);
    if (earliest > now) {
      sleeping_until_ = earliest;
      wake_.wait_until(lock.native(), earliest);
      continue;
    }
    sleeping_until_ = Clock::time_point::min();
    due.clear();
    for (Waiter* w : pending_)
      if (w->first_poll <= now) due.push_back(w);
    // Only this thread removes waiters, so the due ones stay valid while they are polled unlocked.
    lock.Unlock();
    finished.clear();
    for (Waiter* w : due) {
      const bool done = (*w->done)();
      if (!w->polled) {
        w->polled = true;
        w->done_at_first = done;
      }
      if (done) finished.push_back(w);
    }
    if (!finished.empty()) {
      lock.Lock();
      std::erase_if(pending_, [&](const Waiter* w) { return std::ranges::find(finished, w) != finished.end(); });
      lock.Unlock();
    }
    for (Waiter* w : finished) {
      w->state.store(1, std::memory_order_release);
      w->state.notify_one();
      w->state.store(2, std::memory_order_release);
    }
    if (finished.size() < due.size()) std::this_thread::sleep_for(step_);
    lock.Lock();
  }
}

}  // namespace rankd
