// CudaExecutor's launches: a plan's steps enqueued on the executor's stream, or recorded into a
// CUDA graph with the steps on lanes (runtime/step_lanes.h) and instantiated (Capture).
#include <chrono>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "backend/cuda/kernels.h"
#include "common/grace_period.h"
#include "compile/plan.h"
#include "runtime/cuda/cuda_executor.h"
#include "runtime/cuda/graph_launches.h"
#include "runtime/op_profile.h"

namespace rankd::cuda {

Status CudaExecutor::LaunchStep(const Plan& plan, Binding& b, size_t s) {
  const PlanStep& step = plan.steps()[s];
  const Node& node = plan.graph().nodes[static_cast<size_t>(step.node)];
  void* scratch = step.scratch_offset >= 0 ? static_cast<uint8_t*>(workspace_.get()) + step.scratch_offset : nullptr;
  KernelArgs args{node,
                  b.step_inputs[s],
                  b.step_outputs[s],
                  scratch,
                  b.step_host_inputs[s],
                  &ctx_,
                  static_cast<int>(s),
                  step.state.get(),
                  resources_->kernel_counters()};
  if (!b.bf16_copies.written.empty()) {
    auto* copies = static_cast<uint8_t*>(bf16_copies_.get());
    const int64_t written = b.bf16_copies.written[s], read = b.bf16_copies.read[s],
                  second = b.bf16_copies.read_second[s], third = b.bf16_copies.read_third[s];
    ctx_.bf16_out = written >= 0 ? copies + written : nullptr;
    ctx_.bf16_out_alone = written >= 0 && b.bf16_copies.alone[s];
    ctx_.bf16_a = read >= 0 ? copies + read : nullptr;
    ctx_.bf16_a_source = read >= 0 ? b.step_inputs[s][0]->raw() : nullptr;
    ctx_.bf16_b = second >= 0 ? copies + second : nullptr;
    ctx_.bf16_b_source = second >= 0 ? b.step_inputs[s][static_cast<size_t>(Bf16CopyInput(node, 1))]->raw() : nullptr;
    ctx_.bf16_c = third >= 0 ? copies + third : nullptr;
    ctx_.bf16_c_source = third >= 0 ? b.step_inputs[s][static_cast<size_t>(Bf16CopyInput(node, 2))]->raw() : nullptr;
  }
  const bool profile = OpProfile::enabled();
  auto t0 = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  RANKD_RETURN_IF_ERROR(step.kernel(args));
  if (profile) {
    RANKD_CUDA_RETURN(cudaStreamSynchronize(ctx_.stream));
    OpProfile::RecordSince(OpProfile::Key(node.op, node.name), t0);
  }
  return Status::Ok();
}

Status CudaExecutor::Launch(const Plan& plan, Binding& b, const LaneSchedule* lanes) {
  const size_t steps = plan.steps().size();
  cudaStream_t main = ctx_.stream;
  struct Restore {  // the executor's stream and no per-step copies, however the launches end
    DeviceContext& ctx;
    cudaStream_t stream;
    ~Restore() {
      ctx.stream = stream;
      ctx.bf16_out = nullptr;
      ctx.bf16_out_alone = false;
      ctx.bf16_a = ctx.bf16_a_source = ctx.bf16_b = ctx.bf16_b_source = ctx.bf16_c = ctx.bf16_c_source = nullptr;
      ctx.placed_ids = nullptr;
      ctx.staged_rows = nullptr;
      ctx.gathered_ids = nullptr;
      ctx.gathered_rows = nullptr;
    }
  } restore{ctx_, main};
  ctx_.placed_ids = b.placed_ids.empty() ? nullptr : &b.placed_ids;
  ctx_.staged_rows = staged_rows_.device();
  ctx_.gathered_ids = b.gathered_ids.empty() ? nullptr : &b.gathered_ids;
  ctx_.gathered_rows = gathered_rows_.get();
  if (!lanes || lanes->lanes <= 1) {
    RANKD_RETURN_IF_ERROR(GatherHostRows(b));
    for (size_t s = 0; s < steps; ++s) RANKD_RETURN_IF_ERROR(LaunchStep(plan, b, s));
    return Status::Ok();
  }
  // Where the ids gather late their gather on the device follows theirs (schedule entry 0).
  if (!b.late_gather) RANKD_RETURN_IF_ERROR(GatherHostRows(b));
  // Schedule entry 0 is the ids' gather where the ids gather late, and entry j otherwise step
  // j - first.
  const size_t first = b.late_gather ? 1 : 0, jobs = steps + first;
  // events_[0] marks the fork (the inputs on the device, or only the floats where the ids gather
  // late; the error word cleared); events_[1 + j] the
  // end of entry j where another lane waits for it; events_[1 + jobs + l] the end of lane l, which
  // the executor's stream waits for before the output copy (or the run's end). Lanes are joined
  // however the launches end, so that a failed capture still ends with every stream joined.
  std::vector<bool> waited(jobs, false);
  for (size_t j = 0; j < jobs; ++j) {
    for (int w : lanes->waits[j]) waited[static_cast<size_t>(w)] = true;
  }
  auto stream_of = [&](int lane) { return lane == 0 ? main : side_streams_[static_cast<size_t>(lane - 1)]; };
  RANKD_CUDA_RETURN(cudaEventRecord(events_[0], main));
  std::vector<bool> forked(static_cast<size_t>(lanes->lanes), false);
  forked[0] = true;
  auto launch = [&]() -> Status {
    for (size_t j = 0; j < jobs; ++j) {
      const int lane = lanes->lane[j];
      cudaStream_t stream = stream_of(lane);
      if (!forked[static_cast<size_t>(lane)]) {
        RANKD_CUDA_RETURN(cudaStreamWaitEvent(stream, events_[0], 0));
        forked[static_cast<size_t>(lane)] = true;
      }
      for (int w : lanes->waits[j])
        RANKD_CUDA_RETURN(cudaStreamWaitEvent(stream, events_[1 + static_cast<size_t>(w)], 0));
      ctx_.stream = stream;
      if (j < first) {
        RANKD_RETURN_IF_ERROR(GatherInputs(b, GatherPart::kIds));
        RANKD_RETURN_IF_ERROR(GatherHostRows(b));
      } else {
        RANKD_RETURN_IF_ERROR(LaunchStep(plan, b, j - first));
      }
      if (waited[j]) RANKD_CUDA_RETURN(cudaEventRecord(events_[1 + j], stream));
    }
    return Status::Ok();
  };
  Status launched = launch();
  for (int lane = 1; lane < lanes->lanes; ++lane) {  // join: the output copy follows every lane
    if (!forked[static_cast<size_t>(lane)]) continue;
    cudaEvent_t end = events_[1 + jobs + static_cast<size_t>(lane)];
    cudaError_t joined = cudaEventRecord(end, stream_of(lane));
    if (joined == cudaSuccess) joined = cudaStreamWaitEvent(main, end, 0);
    if (launched.ok() && joined != cudaSuccess) launched = Check(joined, "joining a lane");
  }
  return launched;
}

Status CudaExecutor::GatherHostRows(const Binding& b) {
  if (b.gathered.empty()) return Status::Ok();
  const bool profile = OpProfile::enabled();
  auto t0 = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  RANKD_RETURN_IF_ERROR(cuda::GatherHostRows(b.gathered, gather_scratch_.get(), gather_scratch_.size(),
                                             gathered_rows_.get(), b.gathered_units, ctx_.stream));
  if (profile) {
    RANKD_CUDA_RETURN(cudaStreamSynchronize(ctx_.stream));
    OpProfile::RecordSince("(host rows gathered on the device)", t0);
  }
  return Status::Ok();
}

LaneSchedule CudaExecutor::ScheduleOnLanes(const Plan& plan, const Binding& b) const {
  std::vector<StepAccess> access = WorkspaceAccesses(plan);
  const auto& values = plan.values();
  auto copy_range = [&](int64_t offset, int value) {
    const auto bytes = static_cast<int64_t>(Bf16OperandBytes(NumElements(values[static_cast<size_t>(value)].shape)));
    return ByteRange{1, offset, offset + bytes};
  };
  for (size_t s = 0; s < plan.steps().size(); ++s) {
    const PlanStep& step = plan.steps()[s];
    access[s].exclusive = UsesProductBuffers(plan.graph().nodes[static_cast<size_t>(step.node)].op);
    if (b.bf16_copies.written.empty()) continue;
    if (b.bf16_copies.written[s] >= 0)
      access[s].writes.push_back(copy_range(b.bf16_copies.written[s], step.outputs[0]));
    if (b.bf16_copies.read[s] >= 0) access[s].reads.push_back(copy_range(b.bf16_copies.read[s], step.inputs[0]));
    const Node& node = plan.graph().nodes[static_cast<size_t>(step.node)];
    if (b.bf16_copies.read_second[s] >= 0) {
      access[s].reads.push_back(
          copy_range(b.bf16_copies.read_second[s], step.inputs[static_cast<size_t>(Bf16CopyInput(node, 1))]));
    }
    if (b.bf16_copies.read_third[s] >= 0) {
      access[s].reads.push_back(
          copy_range(b.bf16_copies.read_third[s], step.inputs[static_cast<size_t>(Bf16CopyInput(node, 2))]));
    }
  }
  if (b.late_gather) {
    // First the ids' gather, writing their slots of io_ (space 2), which steps read. The floats'
    // came before the lanes fork (Enqueue).
    const std::vector<int> input_of = GraphInputOf(b, values.size());
    for (size_t s = 0; s < plan.steps().size(); ++s) {
      for (int v : plan.steps()[s].inputs) {
        const int input = v >= 0 ? input_of[static_cast<size_t>(v)] : -1;
        if (input < 0) continue;
        const auto at = static_cast<int64_t>(b.in_offsets[static_cast<size_t>(input)]);
        access[s].reads.push_back({2, at, at + static_cast<int64_t>(b.in_bytes[static_cast<size_t>(input)])});
      }
    }
    StepAccess ids;
    ids.writes = {{2, static_cast<int64_t>(b.late_from), static_cast<int64_t>(b.in_total)}};
    access.insert(access.begin(), std::move(ids));
  }
  return ScheduleLanes(access, GraphLanes());
}

void CudaExecutor::NoteCopyNode() {
  if (!recording_) return;  // an uncaptured run: nothing to note, no call on its path
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* last = nullptr;
  size_t count = 0;
  if (cudaStreamGetCaptureInfo(ctx_.stream, &status, nullptr, nullptr, &last, nullptr, &count) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  if (status == cudaStreamCaptureStatusActive && count == 1) copy_nodes_.push_back(last[0]);
}

StatusOr<int64_t> CudaExecutor::Capture(const Plan& plan) {
  if (OpProfile::enabled()) return Unimplemented("plans are not captured while ops are profiled");
  RANKD_CUDA_RETURN(cudaSetDevice(resources_->device()));
  RANKD_ASSIGN_OR_RETURN(Binding * b, Bind(plan));
  RANKD_RETURN_IF_ERROR(Stage(*b));
  if (b->graph) return int64_t{0};
  if (!b->ran) {
    GraceReader reading(resources_->cache_readers());  // the run may read table caches
    // Once uncaptured first, on zero inputs (ids 0, empty bags): what a step sets up on first use
    // (a GEMM's algorithm choice, a kernel's module) may synchronise, which a capture forbids.
    std::memset(staged_inputs_.get(), 0, b->in_total + sizeof(int));
    tails_owner_ = nullptr;  // the tails are zeros now
    if (b->copy_kernels) ListStagedSources(*b);
    Status warm = Enqueue(plan, *b);
    RANKD_CUDA_RETURN(cudaStreamSynchronize(ctx_.stream));
    RANKD_RETURN_IF_ERROR(warm);
    b->ran = true;
  }
  size_t free_before = 0, free_after = 0, total = 0;
  RANKD_CUDA_RETURN(cudaMemGetInfo(&free_before, &total));
  RANKD_ASSIGN_OR_RETURN(cudaGraph_t graph, Record(plan, *b));
  cudaGraphExec_t exec = nullptr;
  cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  RANKD_CUDA_RETURN(instantiated);
  b->graph = std::make_unique<CapturedGraph>(exec);
  RANKD_CUDA_RETURN(cudaGraphUpload(exec, ctx_.stream));
  RANKD_CUDA_RETURN(cudaStreamSynchronize(ctx_.stream));
  RANKD_CUDA_RETURN(cudaMemGetInfo(&free_after, &total));
  return static_cast<int64_t>(free_before > free_after ? free_before - free_after : 0);
}

StatusOr<cudaGraph_t> CudaExecutor::Record(const Plan& plan, Binding& b) {
  const LaneSchedule lanes = ScheduleOnLanes(plan, b);
  while (side_streams_.size() + 1 < static_cast<size_t>(lanes.lanes)) {
    cudaStream_t side = nullptr;
    RANKD_CUDA_RETURN(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    side_streams_.push_back(side);
  }
  while (events_.size() < plan.steps().size() + 2 + static_cast<size_t>(lanes.lanes)) {  // Launch's events
    cudaEvent_t e = nullptr;
    RANKD_CUDA_RETURN(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    events_.push_back(e);
  }
  std::shared_lock<std::shared_mutex> gate(CaptureGate(resources_->device()));
  copy_nodes_.clear();
  RANKD_CUDA_RETURN(cudaStreamBeginCapture(ctx_.stream, cudaStreamCaptureModeThreadLocal));
  recording_ = true;
  Status enqueued = Enqueue(plan, b, false, &lanes);
  recording_ = false;
  cudaGraph_t graph = nullptr;
  cudaError_t ended = cudaStreamEndCapture(ctx_.stream, &graph);
  if (!enqueued.ok() || ended != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();  // a failed capture leaves no sticky error; clear the last one
    return enqueued.ok() ? Check(ended, "cudaStreamEndCapture") : enqueued;
  }
  return graph;
}

StatusOr<Executor::Launches> CudaExecutor::CountLaunches(const Plan& plan) {
  RANKD_CUDA_RETURN(cudaSetDevice(resources_->device()));
  RANKD_ASSIGN_OR_RETURN(Binding * b, Bind(plan));
  RANKD_RETURN_IF_ERROR(Stage(*b));
  RANKD_ASSIGN_OR_RETURN(cudaGraph_t graph, Record(plan, *b));
  StatusOr<Launches> launches = CountGraphLaunches(graph, copy_nodes_);
  cudaGraphDestroy(graph);
  return launches;
}

bool CudaExecutor::Captured(const Plan& plan) const {
  auto it = bindings_.find(plan.id());
  return it != bindings_.end() && it->second.graph;
}

}  // namespace rankd::cuda
