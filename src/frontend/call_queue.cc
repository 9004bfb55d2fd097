#include "frontend/call_queue.h"

#include <algorithm>
#include <string>

#include "common/thread_name.h"

namespace rankd {

CallQueue::CallQueue(CallQueueOptions options) : options_(options) {
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    workers_.emplace_back([this] {
      NameThisThread("rankd-call");
      Work();
    });
  }
}

CallQueue::~CallQueue() { Close(); }

void CallQueue::Close() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

void CallQueue::Submit(Handle handle, Refuse refuse) {
  const auto now = std::chrono::steady_clock::now();
  MutexLock lock(mu_);
  if (stopping_) {
    lock.Unlock();
    refuse("the server is stopping");
    return;
  }
  if (waiting_.size() >= options_.capacity) {
    lock.Unlock();
    refuse("the server is overloaded: " + std::to_string(options_.capacity) + " calls wait to be handled");
    return;
  }
  waiting_.push_back({now, std::move(handle), std::move(refuse)});
  lock.Unlock();
  ready_.notify_one();
}

void CallQueue::Work() {
  MutexLock lock(mu_);
  while (true) {
    while (waiting_.empty() && !stopping_) ready_.wait(lock.native());
    if (waiting_.empty()) return;  // stopping, and nothing waits
    Waiting w = std::move(waiting_.front());
    waiting_.pop_front();
    lock.Unlock();
    Run(w);
    lock.Lock();
  }
}

void CallQueue::Run(Waiting& w) {
  auto waited = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - w.since);
  if (waited > options_.max_wait) {
    w.refuse("the server is overloaded: the call waited " + std::to_string(waited.count() / 1000) +
             " ms to be handled (at most " + std::to_string(options_.max_wait.count() / 1000) + ")");
    return;
  }
  w.handle(waited);
}

}  // namespace rankd
