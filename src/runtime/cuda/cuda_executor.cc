#include "runtime/cuda/cuda_executor.h"

#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "backend/cuda/faults.h"
#include "backend/cuda/mapped_copy.h"
#include "backend/cuda/product_muladd.h"
#include "backend/cuda/split_k_gemm.h"
#include "common/completion_poller.h"
#include "common/grace_period.h"
#include "common/helping_pool.h"
#include "common/mutex.h"
#include "compile/plan.h"
#include "runtime/op_profile.h"

namespace rankd::cuda {
namespace {

std::atomic<int> graph_lanes{4};
std::atomic<bool> copy_kernels{true};
// Runs with at most this many input bytes move them and their outputs by kernels (CopyKernels).
std::atomic<size_t> copy_kernel_bytes{size_t{8} << 20};
std::atomic<bool> late_gather{true};
std::atomic<bool> merged_gather{true};
std::atomic<DeviceWait> device_wait{DeviceWait::kPoller};
std::atomic<int64_t> poll_step_us{10};

// Device `device`'s poller (DeviceWait::kPoller), started on first use with the step set then. It
// lives as long as the process: its thread sleeps when no run is in flight.
CompletionPoller& DevicePoller(int device) {
  static Mutex mu;
  static auto* pollers = new std::map<int, std::unique_ptr<CompletionPoller>>;
  MutexLock lock(mu);
  std::unique_ptr<CompletionPoller>& poller = (*pollers)[device];
  if (!poller) {
    poller = std::make_unique<CompletionPoller>(std::chrono::microseconds(poll_step_us.load()),
                                                [device] { cudaSetDevice(device); });
  }
  return *poller;
}

}  // namespace

void SetGraphLanes(int lanes) { graph_lanes = std::clamp(lanes, 1, 16); }

void SetCopyKernels(bool on) { copy_kernels = on; }

bool CopyKernels() { return copy_kernels.load(); }

void SetCopyKernelBytes(size_t bytes) { copy_kernel_bytes = bytes; }

size_t CopyKernelBytes() { return copy_kernel_bytes.load(); }

void SetLateGather(bool on) { late_gather = on; }

void SetMergedGather(bool on) { merged_gather = on; }

bool MergedGather() { return merged_gather.load(); }

bool LateGather() { return late_gather.load(); }

void SetDeviceWait(DeviceWait wait) { device_wait = wait; }

DeviceWait DeviceWaitMode() { return device_wait.load(); }

void SetPollStep(std::chrono::microseconds step) { poll_step_us = step.count(); }

int GraphLanes() { return graph_lanes.load(); }

StatusOr<std::unique_ptr<Executor>> CudaExecutor::Create(std::shared_ptr<CudaModelResources> resources) {
  std::unique_ptr<CudaExecutor> e(new CudaExecutor(std::move(resources)));
  RANKD_CUDA_RETURN(cudaSetDevice(e->resources_->device()));
  RANKD_CUDA_RETURN(cudaStreamCreateWithFlags(&e->ctx_.stream, cudaStreamNonBlocking));
  RANKD_CUDA_RETURN(cudaEventCreateWithFlags(&e->done_, cudaEventBlockingSync | cudaEventDisableTiming));
  RANKD_CUDA_RETURN(cudaEventCreateWithFlags(&e->polled_, cudaEventDisableTiming));
  if (cublasLtCreate(&e->ctx_.lt) != CUBLAS_STATUS_SUCCESS) return Internal("cublasLtCreate failed");
  RANKD_RETURN_IF_ERROR(e->lt_workspace_.Reserve(kLtWorkspaceBytes));
  e->ctx_.lt_workspace = e->lt_workspace_.get();
  e->ctx_.lt_workspace_bytes = kLtWorkspaceBytes;
  e->ctx_.gemm = &e->gemm_;
  e->ctx_.precision = e->resources_->precision();
  e->ctx_.bf16_weights = &e->resources_->bf16_weights();
  e->ctx_.bf16_weights_nk = &e->resources_->bf16_weights_nk();
  e->ctx_.bf16_weights_padded = &e->resources_->bf16_weights_padded();
  e->row_caches_ = e->resources_->row_caches();
  e->ctx_.row_caches = &e->row_caches_;
  HelpingPool::Shared();  // its helpers start now, not on the first large request
  if (DeviceWaitMode() == DeviceWait::kPoller) e->poller_ = &DevicePoller(e->resources_->device());  // likewise
  PrepareProductMulAdd();  // outside any capture (product_muladd.h)
  PrepareSplitKGemm();     // likewise (split_k_gemm.h)
  return std::unique_ptr<Executor>(std::move(e));
}

CudaExecutor::~CudaExecutor() {
  if (ctx_.stream) cudaStreamSynchronize(ctx_.stream);
  std::lock_guard<std::shared_mutex> gate(CaptureGate(resources_->device()));
  if (ctx_.lt) cublasLtDestroy(ctx_.lt);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  if (done_) cudaEventDestroy(done_);
  if (polled_) cudaEventDestroy(polled_);
  for (cudaStream_t side : side_streams_) cudaStreamDestroy(side);
  if (ctx_.stream) cudaStreamDestroy(ctx_.stream);
}

Status CudaExecutor::Stage(Binding& b) {
  bool grew_io = false, grew_staged = false, grew_out = false;
  RANKD_RETURN_IF_ERROR(io_.Reserve(b.in_total + b.out_total, &grew_io));
  const size_t sources =
      b.copy_kernels ? sizeof(GatherTable) + static_cast<size_t>(b.max_sources) * sizeof(InputSource) : 0;
  RANKD_RETURN_IF_ERROR(staged_inputs_.Reserve(b.sources_at + sources, &grew_staged));
  RANKD_RETURN_IF_ERROR(staged_outputs_.Reserve(b.out_total, &grew_out));
  bool grew_rows = false;
  // At least a unit where any input is placed: the lookups know placed ids by the rows' address.
  if (!b.placed_inputs.empty())
    RANKD_RETURN_IF_ERROR(staged_rows_.Reserve(std::max<size_t>(b.staged_units, 1) * kStagedUnitBytes, &grew_rows));
  // The device gather's scratch and rows: at least a unit of rows where any input is gathered (the
  // lookups know gathered ids by the rows' address).
  if (!b.gathered_inputs.empty()) {
    bool grew_scratch = false, grew_gathered = false;  // Reserve clears its flag: one each
    RANKD_RETURN_IF_ERROR(gather_scratch_.Reserve(b.gather_scratch_bytes, &grew_scratch));
    RANKD_RETURN_IF_ERROR(
        gathered_rows_.Reserve(std::max<size_t>(b.gathered_units, 1) * kStagedUnitBytes, &grew_gathered));
    grew_rows = grew_rows || grew_scratch || grew_gathered;
  }
  if (grew_io || grew_staged || grew_out || grew_rows) DropCaptures();
  if (grew_staged) tails_owner_ = nullptr;  // a new staging buffer holds no tails
  auto* io = static_cast<uint8_t*>(io_.get());
  for (const auto& [id, index] : b.input_rooted) {
    b.views[static_cast<size_t>(id)].set_data(io + b.in_offsets[static_cast<size_t>(index)]);
  }
  // Where the staged rows of tables on disk with a GPU cache lie: their lookups find the cache there.
  for (const void* at : staged_slot_inputs_) row_caches_.index_of.erase(at);
  staged_slot_inputs_.clear();
  for (const auto& [input, view] : resources_->staged_slot_views()) {
    if (input >= b.in_offsets.size()) continue;
    const void* at = io + b.in_offsets[input];
    row_caches_.index_of[at] = view;
    staged_slot_inputs_.push_back(at);
  }
  // Where the placed inputs lie on the device: the lookups reading them read staged rows too.
  b.placed_ids.clear();
  for (size_t i : b.placed_inputs) b.placed_ids.push_back(io + b.in_offsets[i]);
  std::sort(b.placed_ids.begin(), b.placed_ids.end());
  b.gathered_ids.clear();
  for (size_t k = 0; k < b.gathered_inputs.size(); ++k) {
    b.gathered[k].ids = io + b.in_offsets[b.gathered_inputs[k]];
    b.gathered_ids.push_back(b.gathered[k].ids);
  }
  std::sort(b.gathered_ids.begin(), b.gathered_ids.end());
  // The error word and the outputs: in io_ after the inputs, or in the pinned output buffer itself.
  auto* out = b.outputs_pinned ? static_cast<uint8_t*>(staged_outputs_.device()) : io + b.in_total;
  for (const auto& [id, offset] : b.output_rooted) b.views[static_cast<size_t>(id)].set_data(out + offset);
  ctx_.error = reinterpret_cast<int*>(out);
  return Status::Ok();
}

Status CudaExecutor::Enqueue(const Plan& plan, Binding& b, bool inputs_sent, const LaneSchedule* lanes) {
  auto t0 = std::chrono::steady_clock::now();
  if (!inputs_sent && b.copy_kernels) {
    // Where the ids gather late (Binding::late_gather), the floats' gather first (it clears the
    // error word in io_), then the ids' as the schedule's first entry, or next on one stream.
    if (!b.late_gather) {
      RANKD_RETURN_IF_ERROR(GatherInputs(b, GatherPart::kAll));
    } else {
      RANKD_RETURN_IF_ERROR(GatherInputs(b, GatherPart::kFloats));
      if (!lanes || lanes->lanes <= 1) RANKD_RETURN_IF_ERROR(GatherInputs(b, GatherPart::kIds));
    }
  } else if (!inputs_sent) {  // the inputs and the cleared error word after them
    RANKD_CUDA_RETURN(cudaMemcpyAsync(io_.get(), staged_inputs_.get(), b.in_total + sizeof(int), cudaMemcpyHostToDevice,
                                      ctx_.stream));
  }
  if (OpProfile::enabled()) {  // the input copy on its own, not in the first step's time
    RANKD_CUDA_RETURN(cudaStreamSynchronize(ctx_.stream));
    OpProfile::RecordSince("(input copy to the device)", t0);
  }
  RANKD_RETURN_IF_ERROR(Launch(plan, b, lanes));
  // The error word and the outputs after it in one copy, into one pinned buffer, unless the steps
  // wrote them there; an output that is an input or a constant in a copy of its own.
  const Graph& graph = plan.graph();
  auto* back = static_cast<uint8_t*>(staged_outputs_.get());
  if (b.copy_kernels && !b.outputs_pinned) {
    RANKD_RETURN_IF_ERROR(CopyByKernel(ctx_.error, staged_outputs_.device(), b.out_copied, ctx_.stream));
    NoteCopyNode();
  } else if (!b.copy_kernels) {
    RANKD_CUDA_RETURN(cudaMemcpyAsync(back, ctx_.error, b.out_copied, cudaMemcpyDeviceToHost, ctx_.stream));
  }
  for (size_t i = 0; i < graph.outputs.size(); ++i) {
    const Tensor& v = b.views[static_cast<size_t>(graph.outputs[i])];
    if (!b.out_separate[i] || v.bytes() == 0) continue;
    RANKD_CUDA_RETURN(
        cudaMemcpyAsync(back + b.out_offsets[i], v.raw(), v.bytes(), cudaMemcpyDeviceToHost, ctx_.stream));
  }
  return Status::Ok();
}

Status CudaExecutor::WaitForDevice(Binding& b) {
  switch (DeviceWaitMode()) {
    case DeviceWait::kSpin:
      RANKD_CUDA_RETURN(cudaStreamSynchronize(ctx_.stream));
      return Status::Ok();
    case DeviceWait::kBlock:  // asleep until the driver's interrupt wakes the thread
      RANKD_CUDA_RETURN(cudaEventRecord(done_, ctx_.stream));
      RANKD_CUDA_RETURN(cudaEventSynchronize(done_));
      return Status::Ok();
    case DeviceWait::kPoller:
      return WaitForPoller(b);
    case DeviceWait::kNap:
      break;
  }
  // Asleep for most of the plan's usual wait (nap_estimate.h), then spinning to the run's end.
  static thread_local bool fine_timer = [] {
    prctl(PR_SET_TIMERSLACK, 1000UL);  // the thread's sleeps end within 1 µs of asking, not 50
    return true;
  }();
  (void)fine_timer;
  const auto start = std::chrono::steady_clock::now();
  const double nap_us = b.nap.NapUs();
  if (nap_us > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(nap_us));
  const cudaError_t done = cudaStreamQuery(ctx_.stream);
  if (done == cudaSuccess) {  // unmeasured: it ended while the thread slept, or before the query
    if (nap_us > 0) b.nap.DoneOnWaking();
    return Status::Ok();
  }
  if (done != cudaErrorNotReady) RANKD_CUDA_RETURN(done);
  RANKD_CUDA_RETURN(cudaStreamSynchronize(ctx_.stream));
  b.nap.Waited(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  return Status::Ok();
}

Status CudaExecutor::WaitForPoller(Binding& b) {
  RANKD_CUDA_RETURN(cudaEventRecord(polled_, ctx_.stream));
  const auto start = std::chrono::steady_clock::now();
  const double nap_us = b.nap.NapUs();
  cudaError_t result = cudaErrorNotReady;
  const std::function<bool()> done = [&] {
    result = cudaEventQuery(polled_);
    return result != cudaErrorNotReady;
  };
  const auto first_poll = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double, std::micro>(nap_us));
  if (!poller_) poller_ = &DevicePoller(resources_->device());
  const bool done_at_first = poller_->Wait(done, first_poll);
  RANKD_CUDA_RETURN(result);
  if (!done_at_first) {
    b.nap.Waited(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  } else if (nap_us > 0) {
    b.nap.DoneOnWaking();
  }
  return Status::Ok();
}

Status CudaExecutor::RunMergedInto(const Plan& plan, std::span<const Tensor> inputs, DeferredMerge& deferred,
                                   std::span<Tensor> outputs) {
  if (!MergedGather()) deferred.WriteRest();
  deferred_ = &deferred;
  Status status = RunInto(plan, inputs, outputs);
  deferred_ = nullptr;
  return status;
}

Status CudaExecutor::RunInto(const Plan& plan, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  RANKD_RETURN_IF_ERROR(CheckOutputs(plan, outputs));
  // From the launches to the synchronise below, kernels may read the table caches' slots.
  GraceReader reading(resources_->cache_readers());
  PhaseTimer binding("(executor bound to the plan)");
  RANKD_CUDA_RETURN(cudaSetDevice(resources_->device()));
  RANKD_ASSIGN_OR_RETURN(Binding * b, Bind(plan));
  RANKD_RETURN_IF_ERROR(Stage(*b));
  binding.Stop();
  // Inputs: packed into one pinned buffer and copied to the device.
  RANKD_ASSIGN_OR_RETURN(bool inputs_sent, StageInputs(*b, inputs));
  const bool phases = OpProfile::phases();
  auto launched = phases ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  if (phases) RANKD_RETURN_IF_ERROR(span_.Begin(ctx_.stream));
  if (RunPoisons(resources_->device()))
    RANKD_RETURN_IF_ERROR(LaunchPoisonKernel(ctx_.stream));  // fault injection (faults.h)
  if (b->graph && !OpProfile::enabled()) {
    RANKD_CUDA_RETURN(cudaGraphLaunch(b->graph->get(), ctx_.stream));
  } else {
    Status enqueued = Enqueue(plan, *b, inputs_sent);
    if (!enqueued.ok()) {
      cudaStreamSynchronize(ctx_.stream);
      return enqueued;
    }
    b->ran = true;
  }
  for (const GatheredInput& in : b->gathered) CountGatheredIds(static_cast<uint64_t>(in.n));
  auto waiting = phases ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  if (phases) {
    OpProfile::RecordSince(b->graph && !OpProfile::enabled() ? "(graph launched)" : "(steps enqueued)", launched);
    RANKD_RETURN_IF_ERROR(span_.End(ctx_.stream));
  }
  RANKD_RETURN_IF_ERROR(WaitForDevice(*b));
  auto synchronised = phases ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  if (phases) {
    OpProfile::RecordSince("(host waiting for the device)", waiting);
    RANKD_ASSIGN_OR_RETURN(double device_ms, span_.Elapsed());
    OpProfile::Record("(device span of a run: copies in, steps, copies out)", device_ms);
  }
  const Graph& graph = plan.graph();
  const auto* back = static_cast<const uint8_t*>(staged_outputs_.get());
  int error;
  std::memcpy(&error, back, sizeof(int));
  if (error > 0) {
    const Node& node = graph.nodes[static_cast<size_t>(plan.steps()[static_cast<size_t>(error - 1)].node)];
    return InvalidArgument(node.Describe() + ": an id or index is out of range (or ragged offsets are inconsistent)");
  }
  // Each output's first rows (all of them unless the caller asked for fewer) are its first bytes.
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].bytes() > 0) std::memcpy(outputs[i].raw(), back + b->out_offsets[i], outputs[i].bytes());
  }
  if (phases) OpProfile::RecordSince("(outputs copied out of pinned memory)", synchronised);
  return Status::Ok();
}

}  // namespace rankd::cuda
