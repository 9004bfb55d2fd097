// Batcher: the thread plumbing around DecideBatch (batch_policy.h).
//
// Requests (BatchTask) are queued by priority, then arrival. One thread per executor asks the
// policy what to do, runs dispatched batches through `run_batch`, and answers expired requests
// with DEADLINE_EXCEEDED through BatchTask::Fail. A caller may offer its own thread: a request that
// then finds the batcher idle (nothing queued, no batch running) runs on it inside Enqueue, as it
// would without a batcher, so under light load batching costs no hand-over to another thread;
// while a batch runs, requests queue and merge as usual. A full queue refuses new requests at once
// (UNAVAILABLE); ownership of a task moves to the batcher only when Enqueue succeeds. Destruction
// drains: queued requests are still run. Thread-safe.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "batching/batch_policy.h"
#include "common/mutex.h"
#include "rankd/status.h"

namespace rankd {

class BatchTask {
 public:
  virtual ~BatchTask() = default;
  QueuedRequest info;
  // Called (once, instead of running) when the task is dropped, e.g. its deadline passed.
  virtual void Fail(const Status& status) = 0;
};

using RunBatch = std::function<void(std::vector<std::unique_ptr<BatchTask>> batch)>;

struct BatcherOptions {
  BatchPolicyOptions policy;
  int executors = 1;  // batches that may run at once (one thread each)
  // The clock, injectable for tests.
  std::function<BatchClock::time_point()> now = [] { return BatchClock::now(); };
};

class Batcher {
 public:
  Batcher(BatcherOptions options, RunBatch run_batch);
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues `task` (moved from only on success). UNAVAILABLE when the queue is full. With
  // `run_here_when_idle`, a task that finds the batcher idle runs before Enqueue returns.
  Status Enqueue(std::unique_ptr<BatchTask>& task, bool run_here_when_idle = false);
  // Requests run on their caller's thread so far.
  uint64_t ran_on_caller() const;
  size_t queued() const;

 private:
  void ExecutorLoop();

  BatcherOptions options_;
  RunBatch run_batch_;
  mutable Mutex mu_;
  std::condition_variable changed_;
  std::vector<std::unique_ptr<BatchTask>> queue_ RANKD_GUARDED_BY(mu_);  // priority-then-arrival order
  int busy_ RANKD_GUARDED_BY(mu_) = 0;
  uint64_t ran_on_caller_ RANKD_GUARDED_BY(mu_) = 0;
  bool stopping_ RANKD_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace rankd
