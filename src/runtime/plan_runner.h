// PlanRunner: runs a model's plans on its executors and keeps their captures.
//
// It owns the model's state on each of its replicas (one backend each, a GPU apiece when the model
// is replicated: the device weights, Backend::PrepareModel) and the pool of executors made from
// them (runtime/executor_pool.h: a run goes to the least busy healthy replica). With capture on (a device backend,
// shape buckets with graphs), a run of a plan that an executor has not captured is counted as a miss and queues the
// plan's capture on every executor, off the request path; a plan whose capture fails twice runs uncaptured for good. A
// model with table caches gets their keeper (embedding/cache_keeper.h), which every run's inputs are offered to; such a
// model has one replica. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"
#include "common/mutex.h"
#include "compile/plan.h"
#include "embedding/cache_keeper.h"
#include "embedding/disk_tables.h"
#include "runtime/capture_worker.h"
#include "runtime/executor.h"
#include "runtime/executor_pool.h"
#include "runtime/mirrored_table_cache.h"

namespace rankd {

// Captured graphs at run time (metrics).
struct CaptureCounters {
  uint64_t graph_hits = 0;        // executions that replayed a captured graph
  uint64_t graph_misses = 0;      // executions that ran uncaptured (with captures on)
  uint64_t captures = 0;          // plans captured on an executor, warm-up included
  uint64_t capture_failures = 0;  // plans whose capture failed (twice); they run uncaptured
  uint64_t capture_us = 0;        // time spent capturing
};

// What capturing plans on every executor before a model is ready did (CaptureOnEveryExecutor).
// One replica as it stands (rankd inspect, metrics).
struct ReplicaState {
  std::string backend;  // "cuda", "cpu"
  int device = 0;
  uint64_t runs = 0;    // runs it served
  int busy = 0;         // executors running now
  bool healthy = true;  // Backend::Health
};

struct WarmupCaptures {
  int count = 0;  // plans captured, summed over the executors
  int64_t bytes = 0;
  double ms = 0;
  Status status;  // the first failure, after which nothing more was captured
};

class PlanRunner {
 public:
  // Prepares `graph` (which outlives the runner) on each of `backends` (a replica apiece, at least
  // one, all of one device kind) with `options` (precision, table placement), with at most
  // `executors` executors on each (0: the backend's default). `model` names the model in log
  // lines; `keeper` sets up the keeper of its table caches, if it has any.
  static StatusOr<std::unique_ptr<PlanRunner>> Create(const std::vector<const Backend*>& backends, const Graph& graph,
                                                      const PrepareOptions& options, int executors, std::string model,
                                                      const CacheKeeperOptions& keeper = {});
  ~PlanRunner();
  PlanRunner(const PlanRunner&) = delete;
  PlanRunner& operator=(const PlanRunner&) = delete;

  // The first replica's backend.
  const Backend& backend() const { return *executors_->replicas()[0].backend; }
  // The executors' limit per replica; 0 for none.
  int max_executors() const { return max_executors_; }
  size_t replica_count() const { return executors_->replicas().size(); }
  std::vector<ReplicaState> replicas() const;
  // OK while some replica can run work (Backend::Health); else why the first cannot.
  Status Health() const { return executors_->Health(); }

  // An executor (waiting while all are busy, until `deadline`), and back.
  StatusOr<std::unique_ptr<Executor>> Acquire(
      std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) {
    return executors_->Acquire(deadline);
  }
  size_t Release(std::unique_ptr<Executor> executor) { return executors_->Release(std::move(executor)); }

  // With tables on disk, the graph inputs of a run of `plan` on the request's `inputs`: their rows
  // staged and appended (DiskTables::Stage, milliseconds of host work: done before an executor is
  // taken); empty without tables on disk (the request's inputs are the graph's). Keep it until the
  // run is done (StagedRun::hold).
  StatusOr<StagedRun> StageDiskRows(const Plan& plan, std::span<const Tensor> inputs) const;
  // Runs `plan` on `graph_inputs` (the request's, with StageDiskRows' rows where it has tables on
  // disk) on `executor` into `outputs` (Executor::RunInto: the caller's memory, the plan's shapes or
  // fewer rows) and gives the executor back; with `capture` (and capture on), counts a graph hit or
  // miss and queues a capture of the plan on a miss. `deferred`, where given, holds graph inputs of
  // a merged batch not yet written (Executor::RunMergedInto).
  Status RunOn(const std::shared_ptr<const Plan>& plan, std::unique_ptr<Executor> executor,
               std::span<const Tensor> graph_inputs, std::span<Tensor> outputs, bool capture,
               DeferredMerge* deferred = nullptr);
  // Stages, takes an executor from the pool (waiting until `deadline` at most) and runs, into
  // outputs of the plan's shapes it allocates.
  StatusOr<std::vector<Tensor>> Run(
      const std::shared_ptr<const Plan>& plan, std::span<const Tensor> inputs, bool capture,
      std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());
  // Kernels, copies and memsets one run of `plan` puts on the device (Executor::CountLaunches).
  StatusOr<Executor::Launches> CountLaunches(const Plan& plan);

  // Turns capture on; `captured(plan id)` is called once a plan is captured on every executor.
  void StartCapturing(std::function<void(uint64_t)> captured);
  // Turns it off (a warm-up capture failed: the model runs uncaptured).
  void StopCapturing() { capture_ = false; }
  bool capturing() const { return capture_; }
  // Queues a capture of `plan` on every executor unless it is queued or found uncapturable.
  void QueueCapture(const std::shared_ptr<const Plan>& plan);
  // Captures `plans` on every executor the pool may hold (making them), in order, stopping at the
  // first failure or when a capture would take an executor past `limit_bytes` (workspace and graphs).
  WarmupCaptures CaptureOnEveryExecutor(const std::vector<std::shared_ptr<const Plan>>& plans, int64_t limit_bytes);
  // Waits until no background capture is queued or running.
  void WaitForCaptures();
  CaptureCounters counters() const;
  // The keeper of the model's table caches (each run offers it its inputs); null when the model
  // has none.
  CacheKeeper* cache_keeper() const { return cache_keeper_.get(); }
  // Gives the runner the model's tables on disk (embedding/disk_tables.h): every run then stages
  // their rows from its request inputs first. A load-time step, before any run.
  void SetDiskTables(std::unique_ptr<DiskTables> tables) { disk_tables_ = std::move(tables); }
  // The model's tables on disk; null when it has none.
  const DiskTables* disk_tables() const { return disk_tables_.get(); }
  // The values of the model's kernel counters (backend.h's KernelCounters), summed over the
  // replicas; empty without any.
  std::vector<int64_t> ReadCounters() const;

 private:
  PlanRunner(std::vector<Replica> replicas, int executors, std::string model);
  // Captures `plan` on every executor that lacks it, each taken from the pool when idle.
  void CaptureEverywhere(const std::shared_ptr<const Plan>& plan);

  const std::string model_;
  const int max_executors_;
  std::unique_ptr<ExecutorPool> executors_;
  std::unique_ptr<std::atomic<uint64_t>[]> replica_runs_;
  std::atomic<bool> capture_{false};
  std::function<void(uint64_t)> captured_;
  Mutex mu_;
  std::unordered_set<uint64_t> uncapturable_ RANKD_GUARDED_BY(mu_);  // plans whose capture failed
  std::atomic<uint64_t> graph_hits_{0}, graph_misses_{0}, captures_{0}, capture_failures_{0}, capture_us_{0};
  std::vector<std::unique_ptr<MirroredTableCache>> mirrored_caches_;  // a table's caches on every replica
  std::unique_ptr<CacheKeeper> cache_keeper_;                         // stopped before the caches it fills go
  std::unique_ptr<DiskTables> disk_tables_;
  std::unique_ptr<CaptureWorker> capture_worker_;  // last: stopped first, while the rest is alive
};

}  // namespace rankd
