// Model: a CPU run's rows split over the CPU's threads (serving/row_split.h, docs/engine.md).
#include <omp.h>

#include <algorithm>

#include "batching/batch_merge.h"
#include "common/log.h"
#include "common/parallel.h"
#include "serving/model.h"

namespace rankd {
namespace {

// Sizes probed at most: 4, 16 and 64 rows a thread.
constexpr size_t kProbes = 3;
// A probe past the first whose whole runs take longer than this is the last (the larger sizes
// follow it).
constexpr double kLastProbeMicros = 20000;

}  // namespace

StatusOr<std::vector<Tensor>> Model::RunRowSplit(const PreparedRequest& prepared, int parts) const {
  const std::vector<GraphInputKind>& kinds = compiled_->input_kinds();
  RANKD_RETURN_IF_ERROR(CheckSliceable(prepared, kinds));
  std::vector<int64_t> first(static_cast<size_t>(parts) + 1, 0);
  std::vector<PreparedRequest> slices(static_cast<size_t>(parts));
  for (size_t p = 0; p < slices.size(); ++p) {
    first[p + 1] = prepared.rows * static_cast<int64_t>(p + 1) / parts;
    slices[p] = SliceRequest(prepared, kinds, first[p], first[p + 1] - first[p]);
  }
  // The outputs of all the rows, each part writing its own; shaped by the first part's plan.
  RANKD_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan0,
                         PlanFor(MetasOf(slices[0], graph()), slices[0].ragged_max_lengths));
  std::vector<Tensor> outputs = Executor::OutputsFor(*plan0, slices[0].rows, prepared.rows);
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (outputs[o].rank() == 0 || outputs[o].dim(0) != prepared.rows) {
      return Internal("output '" + compiled_->output_names()[o] + "' has shape " + ShapeToString(outputs[o].shape()) +
                      " for a part of " + std::to_string(slices[0].rows) +
                      " rows: it is not one row per candidate, so the rows cannot be split");
    }
  }
  std::vector<Status> status(slices.size());
  ParallelForEach(parts, [&](int64_t p) {
    const PreparedRequest& slice = slices[static_cast<size_t>(p)];
    Status& s = status[static_cast<size_t>(p)];
    StatusOr<std::shared_ptr<const Plan>> plan =
        p == 0 ? plan0 : PlanFor(MetasOf(slice, graph()), slice.ragged_max_lengths);
    if (!plan.ok()) {
      s = plan.status();
      return;
    }
    StatusOr<std::unique_ptr<Executor>> executor = runner_->Acquire(prepared.deadline);
    if (!executor.ok()) {
      s = executor.status();
      return;
    }
    std::vector<Tensor> rows;
    rows.reserve(outputs.size());
    for (const Tensor& out : outputs) rows.push_back(out.Rows(first[static_cast<size_t>(p)], slice.rows));
    s = runner_->RunOn(*plan, std::move(*executor), slice.inputs, rows, /*capture=*/false);
  });
  for (const Status& s : status) RANKD_RETURN_IF_ERROR(s);  // the first part's error first
  return outputs;
}

Status Model::StartRowSplit() {
  const CpuRowSplit mode = options_.cpu_row_split.value_or(config_.cpu_row_split);
  if (mode == CpuRowSplit::kOff || backend().device_kind() != DeviceKind::kHost) return Status::Ok();
  auto off = [this](const std::string& why) {
    report_.row_split = "off (" + why + ")";
    return Status::Ok();
  };
  if (buckets_ || runner_->replica_count() != 1 || runner_->disk_tables()) {
    return off("the model runs on several replicas, in shape buckets or with tables on disk");
  }
  RowSplitPolicy policy;
  policy.mode = mode;
  policy.threads = omp_get_max_threads();
  // A part runs on an executor of its own: no more parts than the model's executors.
  if (runner_->max_executors() > 0) policy.threads = std::min(policy.threads, runner_->max_executors());
  if (policy.threads < 2) return off("one OpenMP thread or executor");
  const RowSplitPolicy always{CpuRowSplit::kOn, policy.threads, {}};  // the parts a split run takes
  const int64_t check_rows = std::min<int64_t>(max_request_rows(), 4 * RowSplitPolicy::kMinPartRows + 3);
  const int check_parts = RowSplitParts(always, check_rows);
  if (check_parts < 2) return off("requests of at most " + std::to_string(max_request_rows()) + " rows");

  // Split runs must score as whole ones do: random dense values, uneven parts, ragged rows of
  // two lengths.
  for (int64_t length : {1, 3}) {
    InferRequest request = ExampleRequest(check_rows, length);
    RandomizeFloats(request, 777 + static_cast<uint32_t>(length));
    PreparedRequest prepared;
    RANKD_RETURN_IF_ERROR(BuildGraphInputs(request, prepared));
    RANKD_ASSIGN_OR_RETURN(std::vector<Tensor> whole, RunPlanned(prepared));
    StatusOr<std::vector<Tensor>> split = RunRowSplit(prepared, check_parts);
    std::string why = split.ok() ? "" : split.status().message();
    for (size_t o = 0; split.ok() && why.empty() && o < whole.size(); ++o) {
      if (!OutputsAgree(whole[o], (*split)[o], AgreementTolerance())) {
        why = "output '" + compiled_->output_names()[o] + "' changes when the rows are split: the graph mixes rows";
      }
    }
    if (!why.empty()) {
      if (mode == CpuRowSplit::kOn) return InvalidArgument(why + " (set cpu_row_split: off)");
      return off(why);
    }
  }

  if (mode == CpuRowSplit::kAuto) {
    // Both ways timed at 4, 16 and 64 rows a thread, as batching's cost model times its batches.
    for (int64_t rows = 4 * policy.threads; rows <= max_request_rows() && policy.probes.size() < kProbes; rows *= 4) {
      const int parts = RowSplitParts(always, rows);
      RANKD_ASSIGN_OR_RETURN(CostSample whole,
                             TimeRuns(rows, 1, [this](const PreparedRequest& p) { return RunPlanned(p); }));
      RANKD_ASSIGN_OR_RETURN(CostSample split, TimeRuns(rows, 1, [this, parts](const PreparedRequest& p) {
                               return RunRowSplit(p, parts);
                             }));
      RowSplitPolicy::Probe probe{rows, whole.micros, split.micros, false};
      probe.split = RowSplitPays(probe.whole_us, probe.split_us);
      policy.probes.push_back(probe);
      if (policy.probes.size() > 1 && probe.whole_us > kLastProbeMicros) break;
    }
  }
  row_split_ = policy;
  report_.row_split = RowSplitSummary(policy);
  LogInfo("model '" + config_.name + "': cpu_row_split " + report_.row_split);
  return Status::Ok();
}

}  // namespace rankd
