// Model: requests queued to the batcher, merged batches run and split back, and the check and
// cost measurement that start batching (docs/batching.md).
#include <chrono>

#include "batching/batch_merge.h"
#include "batching/cost_model.h"
#include "common/elapsed.h"
#include "common/log.h"
#include "serving/model.h"

namespace rankd {

namespace {

// A request waiting in the batcher, with what it needs until it is answered: its graph inputs,
// what they view (`keep`), and the callback its answer goes to.
struct QueuedInfer : BatchTask {
  const InferRequest* request = nullptr;
  std::unique_ptr<PreparedRequest> prepared;
  std::shared_ptr<const void> keep;
  InferDone done;
  InferStats stats;
  void Fail(const Status& status) override { done(status, stats); }
};

}  // namespace

void Model::RunBatch(std::vector<std::unique_ptr<BatchTask>> batch) const {
  BatchClock::time_point now = BatchClock::now();
  std::vector<QueuedInfer*> tasks;
  std::vector<const PreparedRequest*> parts;
  std::vector<int64_t> rows;
  for (auto& t : batch) {
    auto* task = static_cast<QueuedInfer*>(t.get());
    tasks.push_back(task);
    parts.push_back(task->prepared.get());
    rows.push_back(task->prepared->rows);
    task->stats.queue_us =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(now - task->info.enqueued).count());
    task->stats.batch_requests = static_cast<int>(batch.size());
    task->stats.execution = tasks.size() == 1;
  }
  int64_t batch_rows = 0;
  for (int64_t r : rows) batch_rows += r;
  for (QueuedInfer* task : tasks) task->stats.batch_rows = batch_rows;
  auto answer = [this](QueuedInfer& task, StatusOr<std::vector<Tensor>> result) {
    task.done(SelectOutputs(*task.request, std::move(result)), task.stats);
  };
  auto each_alone = [&] {
    for (size_t k = 0; k < tasks.size(); ++k) {
      tasks[k]->stats.batch_requests = 1;
      tasks[k]->stats.execution = true;
      tasks[k]->stats.batch_rows = rows[k];
      answer(*tasks[k], RunRouted(*parts[k]));
    }
  };
  if (tasks.size() == 1) {
    answer(*tasks[0], RunRouted(*parts[0]));
    return;
  }
  if (!MergeNow(parts)) {
    each_alone();
    return;
  }
  auto result = RunRouted(MergeRequests(parts, compiled_->input_kinds(), DefersMerges()));
  auto split = result.ok() ? SplitRows(*result, rows, compiled_->output_names())
                           : StatusOr<std::vector<std::vector<Tensor>>>(result.status());
  if (split.ok()) {
    for (size_t k = 0; k < tasks.size(); ++k) answer(*tasks[k], std::move((*split)[k]));
    return;
  }
  // The batch failed (say an id out of range found on the device): each request runs alone, so
  // only the one at fault fails.
  each_alone();
}

Status Model::StartBatching() {
  const BatchingConfig& b = config_.batching;
  // Merged requests must score as they do alone: two requests of random dense values and
  // different ragged lengths, alone and merged.
  std::vector<InferRequest> examples = {ExampleRequest(2, 1), ExampleRequest(3, 2)};
  RandomizeFloats(examples[0], 12345);
  RandomizeFloats(examples[1], 54321);
  std::vector<PreparedRequest> prepared(examples.size());
  std::vector<std::vector<Tensor>> alone;
  for (size_t k = 0; k < examples.size(); ++k) {
    RANKD_RETURN_IF_ERROR(BuildGraphInputs(examples[k], prepared[k]));
    RANKD_ASSIGN_OR_RETURN(std::vector<Tensor> out, RunPrepared(prepared[k]));
    alone.push_back(std::move(out));
  }
  RANKD_ASSIGN_OR_RETURN(std::vector<Tensor> merged,
                         RunPrepared(MergeRequests({&prepared[0], &prepared[1]}, compiled_->input_kinds())));
  RANKD_ASSIGN_OR_RETURN(auto split,
                         SplitRows(merged, {prepared[0].rows, prepared[1].rows}, compiled_->output_names()));
  double tolerance = AgreementTolerance();
  for (size_t k = 0; k < split.size(); ++k) {
    for (size_t o = 0; o < split[k].size(); ++o) {
      if (!OutputsAgree(alone[k][o], split[k][o], tolerance)) {
        return InvalidArgument("output '" + compiled_->output_names()[o] +
                               "' changes when requests are merged: the graph mixes rows of a batch, so it "
                               "cannot be batched (remove the batching section)");
      }
    }
  }

  BatchPolicyOptions& p = batch_policy_;
  int64_t request_limit = config_.max_batch_size > 0 ? config_.max_batch_size : options_.max_rows;
  p.max_batch_rows = b.max_batch_size > 0 ? b.max_batch_size : request_limit;
  if (buckets_ && b.max_batch_size == 0) {
    // Merged batches stay within the largest bucket: one past it would run at its own shape and
    // grow an executor's buffers, which drops every graph captured on it (W2 over gRPC at 20,000
    // requests/s collapsed so: batches of 9 users, p99 189 ms). The cost model's timings too.
    p.max_batch_rows = std::min(p.max_batch_rows, buckets_->rows().back());
  }
  p.max_queue_delay = std::chrono::microseconds(b.max_queue_delay_microseconds);
  p.max_enqueued = static_cast<size_t>(b.max_queue_size);
  p.max_queue_wait = std::chrono::microseconds(std::max<int64_t>(b.max_queue_wait_microseconds, 0));
  p.auto_queue_wait = b.max_queue_wait_microseconds < 0;
  p.preferred_rows = b.preferred_batch_size;
  FittedCost fit;
  if (b.cost_per_row < 0 || b.cost_per_sequence_element < 0 || b.cost_per_request < 0 || b.cost_budget < 0) {
    // Time batches of growing size (and, with ragged inputs, growing lengths) on this backend.
    std::vector<CostSample> row_samples, sequence_samples;
    auto start = std::chrono::steady_clock::now();
    auto measure = [&](int64_t rows, int64_t length, std::vector<CostSample>& into) -> Status {
      RANKD_ASSIGN_OR_RETURN(CostSample sample,
                             TimeRuns(rows, length, [this](const PreparedRequest& p) { return RunPrepared(p); }));
      into.push_back(sample);
      if (LogVerboseOn(1)) {
        LogVerbose(1, "model '" + config_.name + "': cost probe of " + std::to_string(rows) + " rows, ragged rows of " +
                          std::to_string(length) + " ids (" + std::to_string(sample.sequence_elements) +
                          " sequence ids): " + std::to_string(sample.micros) + " us");
      }
      return Status::Ok();
    };
    for (int64_t rows = 1; rows <= p.max_batch_rows; rows *= 4) {
      RANKD_RETURN_IF_ERROR(measure(rows, 1, row_samples));
      if (row_samples.back().micros > 20000 || MicrosSince(start) > 1e6) break;
    }
    if (!compiled_->ragged_names().empty()) {
      for (const LengthProbe& probe : SequenceProbes(p.max_batch_rows, longest_ragged_length())) {
        RANKD_RETURN_IF_ERROR(measure(probe.rows, probe.length, sequence_samples));
        if (sequence_samples.back().micros > 20000) break;
      }
    }
    fit = FitCost(row_samples, sequence_samples);
  }
  p.cost_per_row = b.cost_per_row >= 0 ? b.cost_per_row : fit.per_row;
  p.cost_per_seq = b.cost_per_sequence_element >= 0 ? b.cost_per_sequence_element : fit.per_sequence_element;
  p.cost_per_request = b.cost_per_request >= 0 ? b.cost_per_request : fit.per_request;
  p.cost_budget = b.cost_budget > 0 ? b.cost_budget : fit.budget;

  BatcherOptions options;
  options.policy = p;
  // Batches in flight: the executors of every replica, so that each GPU has work.
  const int replicas = static_cast<int>(runner_->replica_count());
  const int executors = runner_->max_executors() * replicas;
  options.executors = b.executors > 0 ? b.executors : executors > 0 ? executors : 2 * replicas;
  // Runs the CPU route may take beside them (routing by rows or cost; docs/routing.md).
  if (cpu_route_ && b.executors == 0 &&
      (cpu_route_->policy().mode == CpuRouting::kRows || cpu_route_->policy().mode == CpuRouting::kCost)) {
    options.executors += cpu_route_->cpu_runs();
  }
  batcher_ = std::make_unique<Batcher>(
      options, [this](std::vector<std::unique_ptr<BatchTask>> batch) { RunBatch(std::move(batch)); });
  return Status::Ok();
}

Status Model::Admission() const { return batcher_ ? batcher_->Admission() : Status::Ok(); }

void Model::FailQueued(const Status& why) const {
  if (batcher_) batcher_->FailQueued(why);
}

void Model::Enqueue(const InferRequest& request, std::unique_ptr<PreparedRequest> prepared,
                    std::shared_ptr<const void> keep, InferDone done, bool run_here_when_idle) const {
  const BatchingConfig& b = config_.batching;
  // Without priority levels a request's priority is ignored, as Triton does (one queue).
  if (b.priority_levels > 0 && request.priority > b.priority_levels) {
    return done(InvalidArgument("priority " + std::to_string(request.priority) + " is outside the model's " +
                                std::to_string(b.priority_levels) + " priority levels"),
                InferStats{});
  }
  auto task = std::make_unique<QueuedInfer>();
  task->info.rows = prepared->rows;
  task->info.seq_elements = prepared->sequence_elements;
  task->request = &request;
  task->prepared = std::move(prepared);
  task->keep = std::move(keep);
  task->done = std::move(done);
  int level = b.priority_levels == 0         ? 0
              : request.priority > 0         ? request.priority
              : b.default_priority_level > 0 ? b.default_priority_level
                                             : b.priority_levels;
  task->info.priority = -level;  // level 1 is the highest
  task->info.enqueued = BatchClock::now();
  int64_t timeout = request.timeout_us > 0 ? request.timeout_us : b.default_timeout_microseconds;
  if (timeout > 0) task->info.deadline = task->info.enqueued + std::chrono::microseconds(timeout);
  QueuedInfer* queued = task.get();
  std::unique_ptr<BatchTask> owned = std::move(task);
  // Refused: the task stays ours, and is answered here.
  if (Status s = batcher_->Enqueue(owned, run_here_when_idle); !s.ok()) queued->done(s, queued->stats);
}

}  // namespace rankd
