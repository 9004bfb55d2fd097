#include "runtime/cuda/cuda_executor.h"

#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "backend/cuda/faults.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mapped_copy.h"
#include "backend/cuda/product_muladd.h"
#include "backend/cuda/small_rows_gemm.h"
#include "backend/cuda/split_k_gemm.h"
#include "common/completion_poller.h"
#include "common/grace_period.h"
#include "common/helping_pool.h"
#include "common/mutex.h"
#include "compile/narrowable_ids.h"
#include "compile/plan.h"
#include "runtime/cuda/graph_launches.h"
#include "runtime/op_profile.h"

namespace rankd::cuda {
namespace {

constexpr size_t kAlign = 256;
// Runs move their inputs by kernels with at most this many inputs (the input kernel holds their
// sources in shared memory: 40 bytes each, a block's 48 KB limit in mind).
constexpr size_t kMaxGatheredInputs = 1024;
// Sources past one an input that a merged batch's parts may take (RunMergedInto), within that limit.
constexpr size_t kPartSources = 512;

size_t Aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

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

// Ops whose kernels use the executor's cuBLASLt workspace and bf16 operand buffer (gemm.h).
bool UsesProductBuffers(const std::string& op) { return op == "Gemm" || op == "MatMul" || op == "Einsum"; }

// Room for the bf16 operands of the plan's largest product (gemm.h), with A's rows padded to
// PaddedK where gemm.cc may pad them.
size_t Bf16OperandRoom(const Plan& plan) {
  size_t need = 0;
  for (const PlanStep& step : plan.steps()) {
    const std::string& op = plan.graph().nodes[static_cast<size_t>(step.node)].op;
    if (!UsesProductBuffers(op)) continue;
    size_t bytes = 0;
    for (size_t i = 0; i < 2 && i < step.inputs.size(); ++i) {
      if (step.inputs[i] < 0) continue;
      const Shape& shape = plan.values()[static_cast<size_t>(step.inputs[i])].shape;
      int64_t elements = NumElements(shape);
      if (i == 0 && !shape.empty() && shape.back() > 0) elements = elements / shape.back() * PaddedK(shape.back());
      bytes += Bf16OperandBytes(elements);
    }
    need = std::max(need, bytes);
  }
  return need;
}

}  // namespace

void SetGraphLanes(int lanes) { graph_lanes = std::clamp(lanes, 1, 16); }

void SetCopyKernels(bool on) { copy_kernels = on; }

bool CopyKernels() { return copy_kernels.load(); }

void SetCopyKernelBytes(size_t bytes) { copy_kernel_bytes = bytes; }

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
  e->ctx_.row_caches = &e->resources_->row_caches();
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

StatusOr<CudaExecutor::Binding*> CudaExecutor::Bind(const Plan& plan) {
  bool grew = false;
  RANKD_RETURN_IF_ERROR(workspace_.Reserve(static_cast<size_t>(plan.workspace_bytes()), &grew));
  if (grew) ClearBindings();  // views and captures pointed into the old workspace
  auto it = bindings_.find(plan.id());
  if (it != bindings_.end()) return &it->second;  // its bf16 operand room was reserved when it was bound
  Binding b;
  if (Bf16Products(ctx_.precision)) {
    b.bf16_copies = PlanBf16Copies(plan, ctx_.precision == Precision::kBf16Activations);
    bool grew_operands = false, grew_copies = false;
    RANKD_RETURN_IF_ERROR(bf16_operands_.Reserve(Bf16OperandRoom(plan), &grew_operands));
    RANKD_RETURN_IF_ERROR(bf16_copies_.Reserve(static_cast<size_t>(b.bf16_copies.bytes), &grew_copies));
    ctx_.bf16_operands = bf16_operands_.get();
    ctx_.bf16_operand_bytes = bf16_operands_.size();
    if (grew_operands || grew_copies) ClearBindings();  // captures hold the old buffers' addresses
  }
  if (bindings_.size() > 4096) ClearBindings();  // bound the cache (captures go with it)
  RANKD_ASSIGN_OR_RETURN(auto folded, UploadFolded(plan, b));
  BindViews(plan, folded, b);
  LayOutIo(plan, b);
  PlaceInputs(plan, b);
  for (int in : plan.graph().inputs)
    b.ragged_values.push_back(plan.graph().values[static_cast<size_t>(in)].name.ends_with(".values"));
  return &bindings_.emplace(plan.id(), std::move(b)).first->second;
}

StatusOr<std::unordered_map<const Tensor*, void*>> CudaExecutor::UploadFolded(const Plan& plan, Binding& b) {
  size_t folded_bytes = 0;
  for (const PlanValue& v : plan.values()) {
    if (v.storage == PlanStorage::kConstant && !resources_->Find(v.constant))
      folded_bytes += Aligned(v.constant->bytes());
  }
  std::unordered_map<const Tensor*, void*> folded;
  b.folded = std::make_unique<DeviceBuffer>();
  if (folded_bytes == 0) return folded;
  RANKD_RETURN_IF_ERROR(b.folded->Reserve(folded_bytes));
  auto* base = static_cast<uint8_t*>(b.folded->get());
  size_t pos = 0;
  std::lock_guard<std::shared_mutex> gate(CaptureGate(resources_->device()));  // synchronous copies
  for (const PlanValue& v : plan.values()) {
    if (v.storage != PlanStorage::kConstant || resources_->Find(v.constant) || folded.count(v.constant)) continue;
    size_t bytes = v.constant->bytes();
    if (bytes > 0) RANKD_CUDA_RETURN(cudaMemcpy(base + pos, v.constant->raw(), bytes, cudaMemcpyHostToDevice));
    folded[v.constant] = bytes > 0 ? base + pos : nullptr;  // empty values are never read
    pos += Aligned(bytes);
  }
  return folded;
}

void CudaExecutor::BindViews(const Plan& plan, const std::unordered_map<const Tensor*, void*>& folded, Binding& b) {
  const auto& values = plan.values();
  b.narrowed = NarrowableIdInputs(plan);
  b.views.resize(values.size());
  b.host_views.resize(values.size());
  for (size_t id = 0; id < values.size(); ++id) {
    const PlanValue& v = values[id];
    if (v.storage == PlanStorage::kUnused) continue;
    const PlanValue& root = v.storage == PlanStorage::kAlias ? values[static_cast<size_t>(v.alias_of)] : v;
    void* p = nullptr;
    if (root.storage == PlanStorage::kConstant) {
      p = resources_->Find(root.constant);
      if (!p) p = folded.at(root.constant);
      b.host_views[id] = Tensor::View(v.dtype, v.shape, const_cast<void*>(root.constant->raw()));
    } else if (root.storage == PlanStorage::kWorkspace && root.offset >= 0) {  // no offset: unused
      p = static_cast<uint8_t*>(workspace_.get()) + root.offset;
    } else if (root.storage == PlanStorage::kInput) {
      b.input_rooted.push_back({static_cast<int>(id), root.input_index});
    }
    const bool narrowed = root.storage == PlanStorage::kInput && b.narrowed[static_cast<size_t>(root.input_index)];
    // Addresses the device reads at (a host-tiered table's mapped rows among them).
    b.views[id] =
        Tensor::View(narrowed ? DType::kI32 : v.dtype, v.shape, p, MemoryLocation::Device(resources_->device()));
  }
  for (const PlanStep& step : plan.steps()) {
    auto& ins = b.step_inputs.emplace_back();
    auto& host_ins = b.step_host_inputs.emplace_back();
    for (int in : step.inputs) {
      const bool present = in >= 0;
      ins.push_back(present ? &b.views[static_cast<size_t>(in)] : nullptr);
      host_ins.push_back(present && b.host_views[static_cast<size_t>(in)].defined()
                             ? &b.host_views[static_cast<size_t>(in)]
                             : nullptr);
    }
    auto& outs = b.step_outputs.emplace_back();
    for (int out : step.outputs) outs.push_back(out >= 0 ? &b.views[static_cast<size_t>(out)] : nullptr);
  }
}

void CudaExecutor::LayOutIo(const Plan& plan, Binding& b) {
  const auto& values = plan.values();
  for (size_t i = 0; i < plan.graph().inputs.size(); ++i) {
    const PlanValue& v = values[static_cast<size_t>(plan.graph().inputs[i])];
    b.in_offsets.push_back(b.in_total);
    b.in_bytes.push_back(static_cast<size_t>(NumElements(v.shape)) * (b.narrowed[i] ? 4 : DTypeSize(v.dtype)));
    b.in_total += Aligned(b.in_bytes.back());
  }
  b.copy_kernels = CopyKernels() && b.in_total <= copy_kernel_bytes.load() && b.in_offsets.size() <= kMaxGatheredInputs;
  SplitLateInputs(plan, b);
  b.max_sources = static_cast<int>(std::min(kMaxGatheredInputs, b.in_offsets.size() + kPartSources));
  b.sources_at = Aligned(b.in_total + sizeof(int));
  b.out_total = Aligned(sizeof(int));     // the error word first
  std::unordered_map<int, size_t> moved;  // root value id -> its offset after the error word
  for (int id : plan.graph().outputs) {
    const int root = plan.RootOf(id);
    const PlanValue& r = values[static_cast<size_t>(root)];
    const bool movable = r.storage == PlanStorage::kWorkspace && r.offset >= 0;
    b.out_separate.push_back(!movable);
    if (movable && moved.count(root)) {  // two outputs of one value's bytes
      b.out_offsets.push_back(moved.at(root));
      continue;
    }
    // A moved output takes its root's room whole: every alias of the root points there.
    const size_t root_bytes = movable ? static_cast<size_t>(NumElements(r.shape)) * DTypeSize(r.dtype) : 0;
    b.out_offsets.push_back(b.out_total);
    if (movable) {
      moved[root] = b.out_total;
      b.out_copied = b.out_total + root_bytes;
    }
    b.out_total += Aligned(std::max(root_bytes, b.views[static_cast<size_t>(id)].bytes()));
  }
  b.out_copied = (std::max(b.out_copied, sizeof(int)) + 15) / 16 * 16;
  for (size_t id = 0; id < values.size(); ++id) {
    auto at = moved.find(plan.RootOf(static_cast<int>(id)));
    if (values[id].storage != PlanStorage::kUnused && at != moved.end())
      b.output_rooted.push_back({static_cast<int>(id), at->second});
  }
  // With copy kernels, outputs that no step reads back are written where the host reads them.
  b.outputs_pinned =
      b.copy_kernels && std::none_of(plan.steps().begin(), plan.steps().end(), [&](const PlanStep& step) {
        return std::any_of(step.inputs.begin(), step.inputs.end(),
                           [&](int in) { return in >= 0 && moved.count(plan.RootOf(in)) > 0; });
      });
}

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
    }
  } restore{ctx_, main};
  ctx_.placed_ids = b.placed_ids.empty() ? nullptr : &b.placed_ids;
  ctx_.staged_rows = staged_rows_.device();
  if (!lanes || lanes->lanes <= 1) {
    for (size_t s = 0; s < steps; ++s) RANKD_RETURN_IF_ERROR(LaunchStep(plan, b, s));
    return Status::Ok();
  }
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
      RANKD_RETURN_IF_ERROR(j < first ? GatherInputs(b, GatherPart::kIds) : LaunchStep(plan, b, j - first));
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

std::vector<int> CudaExecutor::GraphInputOf(const Binding& b, size_t values) {
  std::vector<int> input_of(values, -1);
  for (const auto& [id, index] : b.input_rooted) input_of[static_cast<size_t>(id)] = index;
  return input_of;
}

void CudaExecutor::PlaceInputs(const Plan& plan, Binding& b) {
  const RowCaches& caches = resources_->row_caches();
  b.placed.assign(plan.graph().inputs.size(), nullptr);
  if (caches.views.empty()) return;
  b.placed = PlaceableInputs(plan, b.views, GraphInputOf(b, plan.values().size()),
                             [&](const void* table) -> const CudaRowCache* {
                               const int index = caches.Find(table);
                               return index >= 0 ? &resources_->row_cache(index) : nullptr;
                             });
  size_t units = 0;
  for (size_t i = 0; i < b.placed.size(); ++i) {
    if (!b.placed[i]) continue;
    b.placed_inputs.push_back(i);
    const Tensor& ids = b.views[static_cast<size_t>(plan.graph().inputs[i])];
    units += static_cast<size_t>(ids.size()) * static_cast<size_t>(b.placed[i]->row_bytes()) / kStagedUnitBytes;
  }
  // Units past 2^30 could not be named by a place (RowCacheView).
  const size_t most = std::min(StagedRowsBytes() / kStagedUnitBytes, static_cast<size_t>(kStagedSlotFrom) - 1);
  b.staged_units = std::min(units, most);
}

void CudaExecutor::DropCaptures() {
  for (auto& [id, b] : bindings_) b.graph.reset();
}

void CudaExecutor::ClearBindings() {
  bindings_.clear();
  tails_owner_ = nullptr;
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
  if (grew_io || grew_staged || grew_out || grew_rows) DropCaptures();
  if (grew_staged) tails_owner_ = nullptr;  // a new staging buffer holds no tails
  auto* io = static_cast<uint8_t*>(io_.get());
  for (const auto& [id, index] : b.input_rooted) {
    b.views[static_cast<size_t>(id)].set_data(io + b.in_offsets[static_cast<size_t>(index)]);
  }
  // Where the placed inputs lie on the device: the lookups reading them read staged rows too.
  b.placed_ids.clear();
  for (size_t i : b.placed_inputs) b.placed_ids.push_back(io + b.in_offsets[i]);
  std::sort(b.placed_ids.begin(), b.placed_ids.end());
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
