// CudaExecutor's bindings: a plan bound to an executor's buffers on first use (its values' device
// views in the workspace, the weights and io_, its folded values uploaded, where its inputs and
// outputs lie in io_ and the staging buffers, which of its inputs' ids the host places), kept
// until a buffer moves.
#include <algorithm>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "compile/narrowable_ids.h"
#include "compile/plan.h"
#include "runtime/cuda/cuda_executor.h"

namespace rankd::cuda {
namespace {

constexpr size_t kAlign = 256;
// Runs move their inputs by kernels with at most this many inputs (the input kernel holds their
// sources in shared memory: 40 bytes each, a block's 48 KB limit in mind).
constexpr size_t kMaxGatheredInputs = 1024;
// Sources past one an input that a merged batch's parts may take (RunMergedInto), within that limit.
constexpr size_t kPartSources = 512;

size_t Aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

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
  b.copy_kernels = CopyKernels() && b.in_total <= CopyKernelBytes() && b.in_offsets.size() <= kMaxGatheredInputs;
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

std::vector<int> CudaExecutor::GraphInputOf(const Binding& b, size_t values) {
  std::vector<int> input_of(values, -1);
  for (const auto& [id, index] : b.input_rooted) input_of[static_cast<size_t>(id)] = index;
  return input_of;
}

void CudaExecutor::PlaceInputs(const Plan& plan, Binding& b) {
  const RowCaches& caches = resources_->row_caches();
  const std::vector<int> input_of = GraphInputOf(b, plan.values().size());
  const std::vector<int>& inputs = plan.graph().inputs;
  b.placed.assign(inputs.size(), nullptr);
  if (!caches.views.empty()) {
    b.placed = PlaceableInputs(plan, b.views, input_of, [&](const void* table) -> const CudaRowCache* {
      const int index = caches.Find(table);
      return index >= 0 ? &resources_->row_cache(index) : nullptr;
    });
  }
  size_t units = 0;
  for (size_t i = 0; i < b.placed.size(); ++i) {
    if (!b.placed[i]) continue;
    b.placed_inputs.push_back(i);
    const Tensor& ids = b.views[static_cast<size_t>(inputs[i])];
    units += static_cast<size_t>(ids.size()) * static_cast<size_t>(b.placed[i]->row_bytes()) / kStagedUnitBytes;
  }
  // Units past 2^30 could not be named by a place (RowCacheView).
  const size_t most = static_cast<size_t>(kStagedSlotFrom) - 1;
  b.staged_units = std::min(units, std::min(StagedRowsBytes() / kStagedUnitBytes, most));
  // The ids of tables in host memory without a cache, gathered on the device (host_row_gather.h),
  // unless there is no room for their rows.
  if (GatheredRowsBytes() < kStagedUnitBytes) return;
  const std::vector<int> host = BagOnlyInputs(plan, b.views, input_of, [&](const void* table) {
    return resources_->InHostMemory(table) && caches.Find(table) < 0;
  });
  units = 0;
  for (size_t i = 0; i < host.size() && b.gathered.size() < kMostGatheredInputs; ++i) {
    if (host[i] < 0) continue;
    const Tensor& ids = b.views[static_cast<size_t>(inputs[i])];
    const Tensor& table = b.views[static_cast<size_t>(host[i])];
    GatheredInput in;
    in.n = ids.size();
    in.wide = ids.dtype() == DType::kI64;
    in.table = table.raw();
    in.table_rows = table.dim(0);
    in.row_bytes = static_cast<int64_t>(table.bytes()) / std::max<int64_t>(table.dim(0), 1);
    b.gathered.push_back(in);
    b.gathered_inputs.push_back(i);
    units += static_cast<size_t>(in.n) * static_cast<size_t>(in.row_bytes) / kStagedUnitBytes;
  }
  b.gather_scratch_bytes = HostRowGatherScratchBytes(b.gathered);
  if (b.gather_scratch_bytes == 0) {  // none, or more than one gather can take
    b.gathered.clear();
    b.gathered_inputs.clear();
  }
  b.gathered_units = std::min(units, std::min(GatheredRowsBytes() / kStagedUnitBytes, most));
}

void CudaExecutor::DropCaptures() {
  for (auto& [id, b] : bindings_) b.graph.reset();
}

void CudaExecutor::ClearBindings() {
  bindings_.clear();
  tails_owner_ = nullptr;
}

}  // namespace rankd::cuda
