#include "serving/cpu_route.h"

#include "embedding/table_budget.h"

namespace rankd {

StatusOr<std::unique_ptr<CpuRoute>> CpuRoute::Create(Graph graph, const ModelConfig& config, CompileOptions options,
                                                     const CompiledModel& device, const std::string& model) {
  std::unique_ptr<CpuRoute> route(new CpuRoute());
  options.backend = &CpuBackend();
  options.user_hoisting = device.hoisted() ? 1 : 0;
  RANKD_ASSIGN_OR_RETURN(route->compiled_, CompiledModel::Compile(std::move(graph), config, options));
  const CompiledModel& cpu = *route->compiled_;
  const Graph& a = device.graph();
  const Graph& b = cpu.graph();
  bool same = cpu.hoisted() == device.hoisted() && cpu.bindings().size() == device.bindings().size();
  for (size_t i = 0; same && i < cpu.bindings().size(); ++i) {
    const InputBinding &x = device.bindings()[i], &y = cpu.bindings()[i];
    same = x.config_index == y.config_index && x.kind == y.kind &&
           a.values[static_cast<size_t>(a.inputs[i])].dtype == b.values[static_cast<size_t>(b.inputs[i])].dtype;
  }
  if (!same) {
    return InvalidArgument("routing.cpu: the model compiled for the CPU takes other graph inputs than on the " +
                           std::string(device.hoisted() ? "device (hoisted)" : "device") +
                           ", so a request cannot run on either");
  }
  route->cpu_runs_ = config.routing.cpu_runs;
  RANKD_ASSIGN_OR_RETURN(std::vector<TableInfo> tables, PlaceTables(b, TableBudget{}));
  PrepareOptions prepare{cpu.precision(), ToPlacement(tables), {}};
  RANKD_ASSIGN_OR_RETURN(route->runner_,
                         PlanRunner::Create({&CpuBackend()}, b, prepare, route->cpu_runs_, model + " (CPU route)"));
  route->policy_.mode = config.routing.cpu;
  route->policy_.max_rows = config.routing.cpu_max_rows;
  return route;
}

bool CpuRoute::TryTakeCpu() {
  int busy = cpu_busy_.load(std::memory_order_relaxed);
  while (busy < cpu_runs_) {
    if (cpu_busy_.compare_exchange_weak(busy, busy + 1, std::memory_order_relaxed)) return true;
  }
  return false;
}

StatusOr<std::vector<Tensor>> CpuRoute::RunOnCpu(const PreparedRequest& prepared) {
  struct GiveBack {
    std::atomic<int>& busy;
    ~GiveBack() { busy.fetch_sub(1, std::memory_order_relaxed); }
  } give_back{cpu_busy_};
  RANKD_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan,
                         compiled_->PlanFor(MetasOf(prepared, compiled_->graph()), prepared.ragged_max_lengths));
  return runner_->Run(plan, prepared.inputs, /*capture=*/false, prepared.deadline);
}

void CpuRoute::Record(bool on_cpu, bool fallback, int64_t rows, double seconds) {
  if (!counting_.load(std::memory_order_relaxed)) return;
  MutexLock lock(mu_);
  RouteSideCounts& side = on_cpu ? counts_.cpu : counts_.device;
  ++side.runs;
  side.rows += static_cast<uint64_t>(rows);
  side.latency.Add(seconds);
  if (fallback) ++counts_.fallbacks;
}

RouteCounts CpuRoute::counts() const {
  MutexLock lock(mu_);
  return counts_;
}

}  // namespace rankd
