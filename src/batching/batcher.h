// Batcher: the thread plumbing around DecideBatch (batch_policy.h).
//
// Requests (BatchTask) are queued by priority, then arrival. One thread per executor asks the
// policy what to do, runs dispatched batches through `run_batch`, and answers expired requests
// with DEADLINE_EXCEEDED through BatchTask::Fail. A caller may offer its own thread: a request that
// then finds the batcher idle (nothing queued, no batch running) runs on it inside Enqueue, as it
// would without a batcher, so under light load batching costs no hand-over to another thread;
// while a batch runs, requests queue and merge as usual. A full queue refuses new requests at once
// (UNAVAILABLE), and so does a queue whose head waited past its bound (BatchPolicyOptions::
// max_queue_wait, or the automatic bound of a queue that stands); ownership of a task moves to the batcher only when
// Enqueue succeeds. Destruction drains: queued requests are still run (FailQueued answers them
// instead). Thread-safe.
//
// An idle executor is woken only when there is something for it to do (a batch to dispatch,
// expired requests, a forming batch whose delay ends before any idle executor wakes by itself):
// one idle executor times the forming batch's delay, the others sleep until woken, and an executor
// done with a batch decides again itself. Waking every idle executor after each batch and each run
// on a caller's thread cost two context switches per executor and request under light load.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
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
  // What Enqueue would answer a request now, asked before the request is read: UNAVAILABLE when
  // it would be refused (and that counts as a refusal of the automatic bound), else OK.
  Status Admission();
  // Answers every queued request with `why` (BatchTask::Fail) before returning and refuses new
  // ones with it from now on; batches running finish. For a server that stops: its frontends live on
  // until every request they handed in is answered, and after the drain's deadline the queue is
  // answered, not run.
  void FailQueued(const Status& why);
  // Requests run on their caller's thread so far.
  uint64_t ran_on_caller() const;
  size_t queued() const;

 private:
  void ExecutorLoop();
  // Runs `batch` through run_batch_, noting how long it took (for the automatic queue bound).
  void Run(std::vector<std::unique_ptr<BatchTask>> batch);
  // The policy's decision on the queue now.
  BatchDecision Decide() RANKD_REQUIRES(mu_);
  // Whether an idle executor must be woken to act on the queue: it has a batch to dispatch or
  // requests expired, or a forming batch whose delay runs out before any idle executor wakes.
  bool WakeNeeded() RANKD_REQUIRES(mu_);
  // Why a new request is refused now (stopping, a full queue, a late head), or OK.
  Status Refusal() RANKD_REQUIRES(mu_);
  // Why a new request is refused now, or "" (the queue's wait bounds; the queue is not empty).
  std::string Behind(BatchClock::time_point now) RANKD_REQUIRES(mu_);

  BatcherOptions options_;
  RunBatch run_batch_;
  mutable Mutex mu_;
  std::condition_variable changed_;
  std::vector<std::unique_ptr<BatchTask>> queue_ RANKD_GUARDED_BY(mu_);  // priority-then-arrival order
  int busy_ RANKD_GUARDED_BY(mu_) = 0;
  int idle_ RANKD_GUARDED_BY(mu_) = 0;  // executor threads waiting to be woken
  // The earliest time an idle executor wakes at by itself (max: none does).
  BatchClock::time_point timer_ RANKD_GUARDED_BY(mu_) = BatchClock::time_point::max();
  std::vector<QueuedRequest> infos_ RANKD_GUARDED_BY(mu_);  // Decide's copy of the queue
  uint64_t ran_on_caller_ RANKD_GUARDED_BY(mu_) = 0;
  bool stopping_ RANKD_GUARDED_BY(mu_) = false;
  Status failed_why_ RANKD_GUARDED_BY(mu_);           // FailQueued's reason, also the answer to later requests
  double typical_run_us_ RANKD_GUARDED_BY(mu_) = -1;  // a request's run time, its recent least; -1: none yet
  double last_batch_us_ RANKD_GUARDED_BY(mu_) = 0;    // the latest batch's run time
  BatchClock::time_point nonempty_since_ RANKD_GUARDED_BY(mu_);  // the queue last went from empty to not
  BatchClock::time_point shed_at_ RANKD_GUARDED_BY(mu_) = BatchClock::time_point::min();  // the automatic
                                                                                          // bound's last refusal
  std::vector<std::thread> threads_;
};

}  // namespace rankd
