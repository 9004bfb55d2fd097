// Model: plans on the CPU beside the device's, checked and costed at load, and where each run goes
// (docs/routing.md).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "batching/batch_merge.h"
#include "common/elapsed.h"
#include "common/log.h"
#include "serving/model.h"

namespace rankd {
namespace {

std::string CostText(const FittedCost& cost) {
  char text[96];
  std::snprintf(text, sizeof text, "%.1f + %.3f·rows + %.4f·ids µs", cost.per_request, cost.per_row,
                cost.per_sequence_element);
  return text;
}

}  // namespace

int64_t Model::longest_ragged_length() const {
  int64_t longest = 1;
  for (const InputConfig& in : config_.inputs) {
    if (in.ragged) longest = std::max(longest, in.max_length);
  }
  return longest;
}

StatusOr<CostSample> Model::TimeRuns(int64_t rows, int64_t length, const PreparedRun& run) const {
  InferRequest request = ExampleRequest(rows, length);  // `batch` views its tensors
  PreparedRequest batch;
  RANKD_RETURN_IF_ERROR(BuildGraphInputs(request, batch));
  RANKD_RETURN_IF_ERROR(run(batch).status());  // builds the plan, grows the workspace
  std::vector<double> times;
  for (int i = 0; i < 5; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    RANKD_RETURN_IF_ERROR(run(batch).status());
    times.push_back(MicrosSince(t0));
  }
  std::sort(times.begin(), times.end());
  return CostSample{batch.rows, batch.sequence_elements, times[2]};
}

Status Model::StartRouting(Graph graph, const ModelConfig& config) {
  if (runner_->disk_tables()) {
    return InvalidArgument(
        "routing.cpu needs every table in memory: this model has tables on disk (tables.tiers), "
        "which only its device's runs read");
  }
  RANKD_ASSIGN_OR_RETURN(cpu_route_, CpuRoute::Create(std::move(graph), config, options_, *compiled_, config_.name));
  CpuRoute& route = *cpu_route_;
  auto on_cpu = [&route](const PreparedRequest& p) {
    route.TakeCpu();
    return route.RunOnCpu(p);
  };
  auto on_device = [this](const PreparedRequest& p) { return RunPrepared(p); };
  // Both sides score alike: requests of random dense values, one and several rows.
  const double tolerance = AgreementTolerance();
  for (auto [rows, length] : {std::pair<int64_t, int64_t>{1, 1}, {5, 3}}) {
    InferRequest example = ExampleRequest(rows, length);
    RandomizeFloats(example, static_cast<uint32_t>(1000 + rows));
    PreparedRequest prepared;
    RANKD_RETURN_IF_ERROR(BuildGraphInputs(example, prepared));
    RANKD_ASSIGN_OR_RETURN(std::vector<Tensor> device, on_device(prepared));
    RANKD_ASSIGN_OR_RETURN(std::vector<Tensor> cpu, on_cpu(prepared));
    for (size_t o = 0; o < device.size(); ++o) {
      if (!OutputsAgree(device[o], cpu[o], tolerance)) {
        return InvalidArgument("output '" + compiled_->output_names()[o] + "' scored on the CPU differs from the " +
                               backend().name() + " backend's by more than the model's tolerance (" +
                               std::to_string(tolerance) + "): no run can go to the CPU");
      }
    }
  }
  RoutePolicy policy = route.policy();
  if (policy.mode == CpuRouting::kCost) {
    // Both sides timed on the same batches, growing until the CPU takes 20 ms or the whole 2 s.
    // [0]: batches of growing rows, [1]: of growing lengths.
    std::vector<CostSample> device[2], cpu[2];
    const auto start = std::chrono::steady_clock::now();
    auto measure = [&](int64_t rows, int64_t length, int kind) -> Status {
      RANKD_ASSIGN_OR_RETURN(CostSample d, TimeRuns(rows, length, on_device));
      RANKD_ASSIGN_OR_RETURN(CostSample c, TimeRuns(rows, length, on_cpu));
      device[kind].push_back(d);
      cpu[kind].push_back(c);
      return Status::Ok();
    };
    for (int64_t rows = 1; rows <= max_request_rows(); rows *= 4) {
      RANKD_RETURN_IF_ERROR(measure(rows, 1, 0));
      if (cpu[0].back().micros > 20000 || MicrosSince(start) > 2e6) break;
    }
    if (!compiled_->ragged_names().empty()) {  // the batcher's probes (docs/batching.md, "Cost model")
      for (const LengthProbe& probe : SequenceProbes(max_request_rows(), longest_ragged_length())) {
        RANKD_RETURN_IF_ERROR(measure(probe.rows, probe.length, 1));
        if (cpu[1].back().micros > 20000) break;
      }
    }
    policy.device = FitCost(device[0], device[1]);
    policy.cpu = FitCost(cpu[0], cpu[1]);
    LogInfo("model '" + config_.name + "': runs routed by cost: " + backend().name() + " " + CostText(policy.device) +
            ", CPU " + CostText(policy.cpu));
  }
  route.set_policy(policy);
  return Status::Ok();
}

StatusOr<std::vector<Tensor>> Model::RunRouted(const PreparedRequest& prepared) const {
  if (!cpu_route_) return RunPrepared(prepared);
  CpuRoute& route = *cpu_route_;
  RouteLoad load;
  load.device_healthy = runner_->Health().ok();
  load.device_busy = route.device_busy();
  load.device_executors = runner_->max_executors() * static_cast<int>(runner_->replica_count());
  load.cpu_busy = route.cpu_busy();
  load.cpu_runs = route.cpu_runs();
  Route where = ChooseRoute(route.policy(), load, prepared.rows, prepared.sequence_elements);
  if (where == Route::kCpu && !route.TryTakeCpu()) where = Route::kDevice;  // taken since
  const auto start = std::chrono::steady_clock::now();
  if (where == Route::kDevice) {
    route.EnterDevice();
    StatusOr<std::vector<Tensor>> result = RunPrepared(prepared);
    route.LeaveDevice();
    if (result.ok()) {
      route.Record(/*on_cpu=*/false, /*fallback=*/false, prepared.rows, MicrosSince(start) * 1e-6);
      return result;
    }
    if (runner_->Health().ok()) return result;  // the request's own failure, or its deadline
    LogWarning("model '" + config_.name + "': a run failed on the " + backend().name() +
               " backend, which can no longer run work (" + result.status().ToString() + "): it runs on the CPU");
    where = Route::kCpuFallback;
  }
  if (where == Route::kCpuFallback) route.TakeCpu();
  StatusOr<std::vector<Tensor>> result = route.RunOnCpu(prepared);
  if (result.ok()) {
    route.Record(/*on_cpu=*/true, where == Route::kCpuFallback, prepared.rows, MicrosSince(start) * 1e-6);
  }
  return result;
}

}  // namespace rankd
