// CallQueue: calls taken off the network wait here for a thread to handle them, in arrival order,
// bounded in number and in time.
//
// gRPC's completion-queue threads take each inference call as it arrives and hand it here, so that
// taking calls never waits behind handling them: an overload then shows as calls waiting in this
// queue, where their wait is known, instead of as calls unread inside gRPC, where it is not. The
// taking thread never handles a call itself: when it did (while a thread was to spare), a batched
// model's calls, each handled in a fraction of a millisecond, never queued here, and at twice the
// server's capacity calls waited seconds unread inside gRPC, unrefused (docs/log/benchmarks.md,
// "Served W1 at twice its ceiling: the calls' queue"). A call that waited longer than `max_wait`,
// or that finds `capacity` calls waiting, is refused without being handled, so the wait of the
// calls handled stays bounded however far the offered load passes what the server can do.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace rankd {

struct CallQueueOptions {
  int workers = 2;
  size_t capacity = 1024;
  std::chrono::microseconds max_wait{20'000};
};

class CallQueue {
 public:
  // `waited`: how long the call waited to be handled.
  using Handle = std::function<void(std::chrono::microseconds waited)>;
  // `why`: why the call is refused without being handled (the queue is full, or it waited past
  // max_wait).
  using Refuse = std::function<void(const std::string& why)>;

  explicit CallQueue(CallQueueOptions options);
  ~CallQueue();  // Close()
  // Handles what still waits, then joins the workers; calls submitted after it are refused.
  void Close();
  CallQueue(const CallQueue&) = delete;
  CallQueue& operator=(const CallQueue&) = delete;

  // Runs `handle` on a worker, or `refuse` (now, or once the call waited too long). Exactly one of
  // them runs.
  void Submit(Handle handle, Refuse refuse);

 private:
  struct Waiting {
    std::chrono::steady_clock::time_point since;
    Handle handle;
    Refuse refuse;
  };
  void Work();
  // Runs `w`, or refuses it when it waited past max_wait.
  void Run(Waiting& w);

  const CallQueueOptions options_;
  Mutex mu_;
  std::condition_variable ready_;
  std::deque<Waiting> waiting_ RANKD_GUARDED_BY(mu_);
  bool stopping_ RANKD_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace rankd
