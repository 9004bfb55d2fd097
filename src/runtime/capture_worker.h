// CaptureWorker: one background thread that captures plans off the request path.
//
// A request whose plan has no capture on its executor runs uncaptured at once and submits the
// capture here; later requests of that shape replay it (docs/buckets.md). Jobs run one at a
// time, each plan at most once at a time. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "common/mutex.h"

namespace rankd {

class CaptureWorker {
 public:
  CaptureWorker();
  // Stops: pending jobs are dropped, a running one finishes.
  ~CaptureWorker();
  CaptureWorker(const CaptureWorker&) = delete;
  CaptureWorker& operator=(const CaptureWorker&) = delete;

  // Queues `job` unless a job for `plan_id` is queued or running; returns whether it queued it.
  // A plan may be submitted again once its job has run (an executor whose buffers grew lost its
  // captures and needs them again).
  bool Submit(uint64_t plan_id, std::function<void()> job);
  // Waits until no job is queued or running.
  void Drain();

 private:
  void Loop();

  Mutex mu_;
  std::condition_variable changed_;
  std::deque<std::pair<uint64_t, std::function<void()>>> jobs_ RANKD_GUARDED_BY(mu_);
  std::unordered_set<uint64_t> pending_ RANKD_GUARDED_BY(mu_);  // plans queued or running
  bool running_job_ RANKD_GUARDED_BY(mu_) = false;
  bool stop_ RANKD_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace rankd
