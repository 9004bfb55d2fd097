// ExecutorPool: the executors of one loaded model, on each of its replicas (one backend and the
// model's state prepared there each: a GPU apiece when a model is replicated, docs/replicas.md),
// made on demand up to a limit per replica and reused. Each runs one request at a time (its
// workspace, and on a GPU its stream), so a request takes one for its run and gives it back: from
// the healthy replica with the fewest executors busy, so that load spreads over the GPUs and a
// replica whose device failed (Backend::Health) is passed over while another serves. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "common/mutex.h"
#include "runtime/executor.h"

namespace rankd {

// One place a model runs: a backend and the model's state prepared on it (Backend::PrepareModel).
struct Replica {
  const Backend* backend = nullptr;
  std::shared_ptr<ModelResources> resources;
};

class ExecutorPool {
 public:
  // Executors for `replicas` (at least one); at most `max` on each, 0 for no limit (the CPU's
  // executors are only workspaces).
  ExecutorPool(std::vector<Replica> replicas, int max);
  ExecutorPool(const ExecutorPool&) = delete;
  ExecutorPool& operator=(const ExecutorPool&) = delete;
  ~ExecutorPool();

  // An executor of the healthy replica with the fewest busy, idle or new while under its limit,
  // else the next one such a replica releases before `deadline` (DeadlineExceeded past it);
  // Unavailable (the first replica's health) when no replica is healthy.
  StatusOr<std::unique_ptr<Executor>> Acquire(
      std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());
  // Takes `executor` back; returns its replica (an index into replicas()).
  size_t Release(std::unique_ptr<Executor> executor);
  // `executor` (one of All()), once it is idle.
  std::unique_ptr<Executor> Take(const Executor* executor);
  // Every executor made so far, idle or not (to capture a plan on each).
  std::vector<const Executor*> All() const;
  // The replica `executor` (one of All()) belongs to, as an index into replicas().
  size_t ReplicaOf(const Executor* executor) const;
  const std::vector<Replica>& replicas() const { return replicas_; }
  // Executors of replica `r` running a request now.
  int Busy(size_t r) const;
  // The limit per replica; 0 for none.
  int max() const { return max_; }
  // OK while some replica is healthy; else the first replica's health.
  Status Health() const;

 private:
  struct Slots {
    int created = 0;  // including ones being made
    std::vector<std::unique_ptr<Executor>> idle;
  };
  // The replica Acquire takes from now (-1: none has an executor to give; -2: none is healthy).
  int Pick() const RANKD_REQUIRES(mu_);

  std::vector<Replica>
      replicas_;  // released last first (a later replica may read host memory an earlier one registered)
  std::vector<const Backend*> backends_;  // replicas_' backends, in order (Health)
  const int max_;
  mutable Mutex mu_;
  std::condition_variable freed_;
  int takers_ RANKD_GUARDED_BY(mu_) = 0;  // Take calls waiting
  std::vector<Slots> slots_ RANKD_GUARDED_BY(mu_);
  std::vector<const Executor*> all_ RANKD_GUARDED_BY(mu_);
  std::unordered_map<const Executor*, size_t> replica_of_ RANKD_GUARDED_BY(mu_);
};

}  // namespace rankd
