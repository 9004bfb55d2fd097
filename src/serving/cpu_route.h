// CpuRoute: a model's plans on the CPU beside those on its device, and the runs routed to either
// (docs/routing.md). Made at load from the graph as imported, compiled for the CPU with the
// device's hoisting, so that one request's graph inputs feed either side (Create checks that they
// do); the model checks that both score alike before it serves. It bounds the CPU's runs at once,
// counts the device's runs in flight (the queue ChooseRoute reads) and each side's runs, rows and
// run times for metrics. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/latency_histogram.h"
#include "common/mutex.h"
#include "common/prepared_request.h"
#include "compile/compiled_model.h"
#include "model/config.h"
#include "model/graph.h"
#include "rankd/status.h"
#include "rankd/tensor.h"
#include "runtime/plan_runner.h"
#include "serving/route_policy.h"

namespace rankd {

// Runs on one side of a route since the model loaded (its load-time runs not counted).
struct RouteSideCounts {
  uint64_t runs = 0;
  uint64_t rows = 0;
  LatencyHistogram latency;  // each run's time on its side, the wait for an executor included
};
struct RouteCounts {
  RouteSideCounts device, cpu;
  uint64_t fallbacks = 0;  // runs on the CPU because the device could not run work (included in cpu)
};

class CpuRoute {
 public:
  // Compiles `graph` (the model as imported) with `config` for the CPU, hoisting as `device` (the
  // device's compiled model) does, and prepares it with `routing.cpu_runs` executors. Fails when
  // the two take different graph inputs (a pass that only one backend runs changed them).
  static StatusOr<std::unique_ptr<CpuRoute>> Create(Graph graph, const ModelConfig& config, CompileOptions options,
                                                    const CompiledModel& device, const std::string& model);

  const CompiledModel& compiled() const { return *compiled_; }
  const RoutePolicy& policy() const { return policy_; }
  // Sets the policy: the config's mode and threshold, and for kCost the fitted costs (a load-time step).
  void set_policy(const RoutePolicy& policy) { policy_ = policy; }
  int cpu_runs() const { return cpu_runs_; }

  // What ChooseRoute needs from this side: the CPU's runs now, and the device's.
  int cpu_busy() const { return cpu_busy_.load(std::memory_order_relaxed); }
  int device_busy() const { return device_busy_.load(std::memory_order_relaxed); }

  // Takes a free CPU run; false when all are taken.
  bool TryTakeCpu();
  // Takes a CPU run whether or not one is free (a fallback: the run then waits for an executor).
  void TakeCpu() { cpu_busy_.fetch_add(1, std::memory_order_relaxed); }
  // Runs `prepared` on the CPU in a run taken by TryTakeCpu or TakeCpu, and gives the run back.
  StatusOr<std::vector<Tensor>> RunOnCpu(const PreparedRequest& prepared);

  // Marks a run on the device side, from before it waits for an executor until it has ended.
  void EnterDevice() { device_busy_.fetch_add(1, std::memory_order_relaxed); }
  void LeaveDevice() { device_busy_.fetch_sub(1, std::memory_order_relaxed); }

  // Counts a run that succeeded on the device or the CPU (`fallback`: there because the device
  // could not run work), with its time in seconds. Load-time runs are not counted (StartCounting).
  void Record(bool on_cpu, bool fallback, int64_t rows, double seconds);
  void StartCounting() { counting_.store(true, std::memory_order_relaxed); }
  RouteCounts counts() const;

 private:
  CpuRoute() = default;

  std::unique_ptr<CompiledModel> compiled_;
  std::unique_ptr<PlanRunner> runner_;
  RoutePolicy policy_;
  int cpu_runs_ = 1;
  std::atomic<int> cpu_busy_{0}, device_busy_{0};
  std::atomic<bool> counting_{false};
  mutable Mutex mu_;
  RouteCounts counts_ RANKD_GUARDED_BY(mu_);
};

}  // namespace rankd
