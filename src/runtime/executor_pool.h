// ExecutorPool: the executors of one loaded model on one backend, made on demand up to a limit and
// reused. Each runs one request at a time (its workspace, and on a GPU its stream), so a request
// takes one for its run and gives it back. Thread-safe.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.h"
#include "common/mutex.h"
#include "runtime/executor.h"

namespace rankd {

class ExecutorPool {
 public:
  // Executors for the model `resources` belongs to (Backend::PrepareModel); at most `max` of them,
  // 0 for no limit (the CPU's executors are only workspaces).
  ExecutorPool(const Backend& backend, std::shared_ptr<ModelResources> resources, int max);
  ExecutorPool(const ExecutorPool&) = delete;
  ExecutorPool& operator=(const ExecutorPool&) = delete;

  // An idle executor, a new one while under the limit, or else the next one released.
  StatusOr<std::unique_ptr<Executor>> Acquire();
  void Release(std::unique_ptr<Executor> executor);
  // `executor` (one of All()), once it is idle.
  std::unique_ptr<Executor> Take(const Executor* executor);
  // Every executor made so far, idle or not (to capture a plan on each).
  std::vector<const Executor*> All() const;
  int max() const { return max_; }

 private:
  const Backend& backend_;
  const std::shared_ptr<ModelResources> resources_;
  const int max_;
  mutable Mutex mu_;
  std::condition_variable freed_;
  int created_ RANKD_GUARDED_BY(mu_) = 0;  // including ones being made
  int takers_ RANKD_GUARDED_BY(mu_) = 0;   // Take calls waiting
  std::vector<std::unique_ptr<Executor>> idle_ RANKD_GUARDED_BY(mu_);
  std::vector<const Executor*> all_ RANKD_GUARDED_BY(mu_);
};

}  // namespace rankd
