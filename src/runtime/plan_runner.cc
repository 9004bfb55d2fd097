#include "runtime/plan_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "common/log.h"
#include "compile/evaluate.h"
#include "runtime/op_profile.h"

namespace rankd {
namespace {

uint64_t MicrosSince(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count());
}

// Captures `plan` on `executor`, trying twice: a capture can fail for reasons outside it (a CUDA
// library synchronising on another thread), and a plan found uncapturable runs uncaptured for good.
StatusOr<int64_t> CaptureWithRetry(Executor& executor, const Plan& plan) {
  auto bytes = executor.Capture(plan);
  if (!bytes.ok() && bytes.status().code() == StatusCode::kInternal) bytes = executor.Capture(plan);
  return bytes;
}

}  // namespace

StatusOr<std::unique_ptr<PlanRunner>> PlanRunner::Create(const std::vector<const Backend*>& backends,
                                                         const Graph& graph, const PrepareOptions& options,
                                                         int executors, std::string model,
                                                         const CacheKeeperOptions& keeper) {
  if (backends.empty()) return InvalidArgument("a model runs on at least one backend");
  for (const Backend* b : backends) {
    if (b->device_kind() != backends[0]->device_kind())
      return InvalidArgument("a model's replicas run on one kind of device");
  }
  // Every replica's room is checked before any takes memory.
  for (const Backend* b : backends) {
    Status room = b->CheckRoom(graph, options, executors);
    if (!room.ok() && backends.size() > 1)
      room = room.WithContext(std::string("replica on ") + b->name() + ":" + std::to_string(b->device()));
    RANKD_RETURN_IF_ERROR(room);
  }
  std::vector<Replica> replicas;
  for (const Backend* b : backends) {
    RANKD_ASSIGN_OR_RETURN(std::shared_ptr<ModelResources> resources, b->PrepareModel(graph, options));
    replicas.push_back({b, std::move(resources)});
  }
  // A table's caches on every replica, kept alike by one keeper (mirrored_table_cache.h).
  std::map<int, std::vector<TableCache*>> per_table;
  for (const Replica& r : replicas) {
    if (!r.resources) continue;
    for (const auto& [table, cache] : r.resources->table_caches()) per_table[table].push_back(cache);
  }
  const int per_replica = executors > 0 ? executors : backends[0]->DefaultExecutors();
  std::unique_ptr<PlanRunner> runner(new PlanRunner(std::move(replicas), per_replica, std::move(model)));
  std::map<int, TableCache*> caches;
  for (auto& [table, replica_caches] : per_table) {
    if (replica_caches.size() == 1) {
      caches[table] = replica_caches[0];
      continue;
    }
    runner->mirrored_caches_.push_back(std::make_unique<MirroredTableCache>(std::move(replica_caches)));
    caches[table] = runner->mirrored_caches_.back().get();
  }
  if (!caches.empty()) {
    CacheKeeperOptions options = keeper;
    if (!options.evaluate_node) {  // ids the graph computes are traced from the sampled inputs
      options.evaluate_node = [](const Node& node, const std::vector<const Tensor*>& inputs) {
        return EvaluateNode(node, inputs);
      };
    }
    runner->cache_keeper_ = std::make_unique<CacheKeeper>(graph, caches, options);
  }
  return runner;
}

PlanRunner::PlanRunner(std::vector<Replica> replicas, int executors, std::string model)
    : model_(std::move(model)),
      max_executors_(executors),
      executors_(std::make_unique<ExecutorPool>(std::move(replicas), executors)),
      replica_runs_(std::make_unique<std::atomic<uint64_t>[]>(executors_->replicas().size())) {}

std::vector<ReplicaState> PlanRunner::replicas() const {
  std::vector<ReplicaState> states;
  const std::vector<Replica>& replicas = executors_->replicas();
  for (size_t r = 0; r < replicas.size(); ++r) {
    const Backend& b = *replicas[r].backend;
    states.push_back(
        {b.name(), b.device(), replica_runs_[r].load(std::memory_order_relaxed), executors_->Busy(r), b.Health().ok()});
  }
  return states;
}

std::vector<int64_t> PlanRunner::ReadCounters() const {
  std::vector<int64_t> sums;
  for (const Replica& r : executors_->replicas()) {
    if (!r.resources) continue;
    const std::vector<int64_t> values = r.resources->ReadCounters();
    if (sums.empty()) sums.assign(values.size(), 0);
    for (size_t i = 0; i < values.size() && i < sums.size(); ++i) {
      // A negative value says the counter could not be read; it stays so.
      sums[i] = sums[i] < 0 || values[i] < 0 ? std::min(sums[i], values[i]) : sums[i] + values[i];
    }
  }
  return sums;
}

PlanRunner::~PlanRunner() = default;

StatusOr<std::vector<Tensor>> PlanRunner::Run(const std::shared_ptr<const Plan>& plan, std::span<const Tensor> inputs,
                                              bool capture, std::chrono::steady_clock::time_point deadline) {
  RANKD_ASSIGN_OR_RETURN(StagedRun staged, StageDiskRows(*plan, inputs));
  RANKD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, Acquire(deadline));
  std::vector<Tensor> outputs = Executor::OutputsFor(*plan);
  RANKD_RETURN_IF_ERROR(
      RunOn(plan, std::move(executor), staged.inputs.empty() ? inputs : staged.inputs, outputs, capture));
  return outputs;
}

StatusOr<StagedRun> PlanRunner::StageDiskRows(const Plan& plan, std::span<const Tensor> inputs) const {
  if (!disk_tables_) return StagedRun{};
  const Graph& graph = plan.graph();
  std::vector<int64_t> rows;
  for (size_t i = disk_tables_->request_inputs(); i < graph.inputs.size(); ++i) {
    const Shape& shape = plan.values()[static_cast<size_t>(graph.inputs[i])].shape;
    rows.push_back(shape.empty() ? 0 : shape[0]);
  }
  PhaseTimer staging("(rows of tables on disk staged)");
  return disk_tables_->Stage(inputs, rows);
}

Status PlanRunner::RunOn(const std::shared_ptr<const Plan>& plan, std::unique_ptr<Executor> executor,
                         std::span<const Tensor> graph_inputs, std::span<Tensor> outputs, bool capture,
                         DeferredMerge* deferred) {
  capture = capture && capture_;
  bool captured = capture && executor->Captured(*plan);
  // The keeper reads the ids of every run it is offered.
  if (deferred && cache_keeper_) deferred->WriteRest();
  Status result = deferred ? executor->RunMergedInto(*plan, graph_inputs, *deferred, outputs)
                           : executor->RunInto(*plan, graph_inputs, outputs);
  // A run whose staging buffers had to grow dropped the executor's captures, this plan's too.
  captured = captured && executor->Captured(*plan);
  PhaseTimer releasing("(executor released)");
  const size_t replica = Release(std::move(executor));
  releasing.Stop();
  replica_runs_[replica].fetch_add(1, std::memory_order_relaxed);
  if (cache_keeper_ && result.ok()) cache_keeper_->Offer(graph_inputs);
  if (capture) {
    if (captured) {
      ++graph_hits_;
    } else {
      ++graph_misses_;
      // Executors that have it are skipped, those that lost it (their buffers grew) capture it again.
      QueueCapture(plan);
    }
  }
  return result;
}

StatusOr<Executor::Launches> PlanRunner::CountLaunches(const Plan& plan) {
  RANKD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, Acquire());
  auto launches = executor->CountLaunches(plan);
  Release(std::move(executor));
  return launches;
}

void PlanRunner::StartCapturing(std::function<void(uint64_t)> captured) {
  captured_ = std::move(captured);
  if (!capture_worker_) capture_worker_ = std::make_unique<CaptureWorker>();
  capture_ = true;
}

void PlanRunner::QueueCapture(const std::shared_ptr<const Plan>& plan) {
  if (!capture_) return;
  {
    MutexLock lock(mu_);
    if (uncapturable_.count(plan->id())) return;
  }
  capture_worker_->Submit(plan->id(), [this, plan] { CaptureEverywhere(plan); });
}

void PlanRunner::CaptureEverywhere(const std::shared_ptr<const Plan>& plan) {
  for (const Executor* e : executors_->All()) {
    std::unique_ptr<Executor> executor = executors_->Take(e);
    if (!executor->Captured(*plan)) {
      auto start = std::chrono::steady_clock::now();
      auto bytes = CaptureWithRetry(*executor, *plan);
      if (bytes.ok()) {
        ++captures_;
        capture_us_ += MicrosSince(start);
      } else {
        ++capture_failures_;
        LogWarning("model '" + model_ +
                   "': capturing a plan failed (it runs uncaptured): " + bytes.status().ToString());
        {
          MutexLock lock(mu_);
          uncapturable_.insert(plan->id());
        }
        Release(std::move(executor));
        return;
      }
    }
    Release(std::move(executor));
  }
  if (captured_) captured_(plan->id());
}

WarmupCaptures PlanRunner::CaptureOnEveryExecutor(const std::vector<std::shared_ptr<const Plan>>& plans,
                                                  int64_t limit_bytes) {
  WarmupCaptures done;
  std::vector<std::unique_ptr<Executor>> held;
  const int count = std::max(max_executors_, 1) * static_cast<int>(executors_->replicas().size());
  for (int i = 0; i < count; ++i) {
    auto e = Acquire();
    if (!e.ok()) {
      done.status = e.status();
      break;
    }
    held.push_back(std::move(*e));
  }
  auto start = std::chrono::steady_clock::now();
  int64_t workspace = 0;
  for (const auto& plan : plans) workspace = std::max(workspace, plan->workspace_bytes());
  for (auto& executor : held) {
    if (!done.status.ok()) break;
    for (const auto& plan : plans) {
      if (workspace + done.bytes / count > limit_bytes) break;
      auto bytes = CaptureWithRetry(*executor, *plan);
      if (!bytes.ok()) {
        done.status = bytes.status();
        break;
      }
      ++done.count;
      done.bytes += *bytes;
    }
  }
  for (auto& executor : held) Release(std::move(executor));
  done.ms = static_cast<double>(MicrosSince(start)) / 1000.0;
  captures_ += static_cast<uint64_t>(done.count);
  capture_us_ += MicrosSince(start);
  return done;
}

void PlanRunner::WaitForCaptures() {
  if (capture_worker_) capture_worker_->Drain();
}

CaptureCounters PlanRunner::counters() const {
  return {graph_hits_.load(), graph_misses_.load(), captures_.load(), capture_failures_.load(), capture_us_.load()};
}

}  // namespace rankd
