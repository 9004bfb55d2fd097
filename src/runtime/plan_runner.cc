#include "runtime/plan_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "common/log.h"
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

StatusOr<std::unique_ptr<PlanRunner>> PlanRunner::Create(const Backend& backend, const Graph& graph,
                                                         const PrepareOptions& options, int executors,
                                                         std::string model, const CacheKeeperOptions& keeper) {
  RANKD_RETURN_IF_ERROR(backend.CheckRoom(graph, options, executors));
  RANKD_ASSIGN_OR_RETURN(std::shared_ptr<ModelResources> resources, backend.PrepareModel(graph, options));
  std::unique_ptr<PlanRunner> runner(new PlanRunner(backend, std::move(resources), executors, std::move(model)));
  const std::map<int, TableCache*> caches =
      runner->resources_ ? runner->resources_->table_caches() : std::map<int, TableCache*>{};
  if (!caches.empty()) runner->cache_keeper_ = std::make_unique<CacheKeeper>(graph, caches, keeper);
  return runner;
}

PlanRunner::PlanRunner(const Backend& backend, std::shared_ptr<ModelResources> resources, int executors,
                       std::string model)
    : backend_(backend),
      model_(std::move(model)),
      max_executors_(executors > 0 ? executors : backend.DefaultExecutors()),
      resources_(std::move(resources)),
      executors_(std::make_unique<ExecutorPool>(backend_, resources_, max_executors_)) {}

PlanRunner::~PlanRunner() = default;

StatusOr<std::vector<Tensor>> PlanRunner::Run(const std::shared_ptr<const Plan>& plan, std::span<const Tensor> inputs,
                                              bool capture) {
  RANKD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, Acquire());
  return RunOn(plan, std::move(executor), inputs, capture);
}

StatusOr<std::vector<Tensor>> PlanRunner::RunOn(const std::shared_ptr<const Plan>& plan,
                                                std::unique_ptr<Executor> executor, std::span<const Tensor> inputs,
                                                bool capture) {
  capture = capture && capture_;
  bool captured = capture && executor->Captured(*plan);
  auto result = executor->Run(*plan, inputs);
  // A run whose staging buffers had to grow dropped the executor's captures, this plan's too.
  captured = captured && executor->Captured(*plan);
  PhaseTimer releasing("(executor released)");
  Release(std::move(executor));
  releasing.Stop();
  if (cache_keeper_ && result.ok()) cache_keeper_->Offer(inputs);
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
  const int count = std::max(max_executors_, 1);
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
