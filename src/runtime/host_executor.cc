#include "runtime/host_executor.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "compile/plan.h"
#include "runtime/op_profile.h"

namespace rankd {
namespace {

class HostExecutor final : public Executor {
 public:
  explicit HostExecutor(std::shared_ptr<ModelResources> resources) : resources_(std::move(resources)) {}
  Status RunInto(const Plan& plan, std::span<const Tensor> inputs, std::span<Tensor> outputs) override;

 private:
  // Tensor views of every value of one plan over this executor's workspace.
  struct Binding {
    std::vector<Tensor> views;
    std::vector<std::vector<const Tensor*>> step_inputs;
    std::vector<std::vector<Tensor*>> step_outputs;
    std::vector<std::pair<int, int>> input_rooted;  // (value id, graph input index) set per run
  };
  Binding& Bind(const Plan& plan);

  struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, FreeDeleter> workspace_;
  int64_t workspace_bytes_ = 0;
  std::unordered_map<uint64_t, Binding> bindings_;
  std::shared_ptr<ModelResources> resources_;  // may be null
};

HostExecutor::Binding& HostExecutor::Bind(const Plan& plan) {
  if (plan.workspace_bytes() > workspace_bytes_) {
    int64_t bytes = (plan.workspace_bytes() + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, static_cast<size_t>(bytes));
    RANKD_CHECK_MSG(p != nullptr, "out of host memory for the workspace");
    workspace_.reset(static_cast<uint8_t*>(p));
    workspace_bytes_ = bytes;
    bindings_.clear();  // views pointed into the old workspace
  }
  auto it = bindings_.find(plan.id());
  if (it != bindings_.end()) return it->second;
  if (bindings_.size() > 256) bindings_.clear();  // bound the cache; rebinding is cheap
  Binding& b = bindings_[plan.id()];
  const auto& values = plan.values();
  b.views.resize(values.size());
  auto pointer = [&](const PlanValue& v) -> void* {
    switch (v.storage) {
      case PlanStorage::kConstant:
        return const_cast<void*>(v.constant->raw());
      // A workspace value no step keeps (dropped as unused) has no offset.
      case PlanStorage::kWorkspace:
        return v.offset < 0 ? nullptr : workspace_.get() + v.offset;
      default:
        return nullptr;  // inputs are bound per run
    }
  };
  for (size_t id = 0; id < values.size(); ++id) {
    const PlanValue& v = values[id];
    if (v.storage == PlanStorage::kUnused) continue;
    const PlanValue& root = v.storage == PlanStorage::kAlias ? values[static_cast<size_t>(v.alias_of)] : v;
    b.views[id] = Tensor::View(v.dtype, v.shape, pointer(root));
    if (root.storage == PlanStorage::kInput) b.input_rooted.push_back({static_cast<int>(id), root.input_index});
  }
  for (const PlanStep& step : plan.steps()) {
    auto& ins = b.step_inputs.emplace_back();
    for (int in : step.inputs) ins.push_back(in >= 0 ? &b.views[static_cast<size_t>(in)] : nullptr);
    auto& outs = b.step_outputs.emplace_back();
    for (int out : step.outputs) outs.push_back(out >= 0 ? &b.views[static_cast<size_t>(out)] : nullptr);
  }
  return b;
}

Status HostExecutor::RunInto(const Plan& plan, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  RANKD_RETURN_IF_ERROR(CheckOutputs(plan, outputs));
  Binding& b = Bind(plan);
  for (const auto& [id, index] : b.input_rooted) {
    b.views[static_cast<size_t>(id)].set_data(const_cast<void*>(inputs[static_cast<size_t>(index)].raw()));
  }
  const Graph& graph = plan.graph();
  const auto& steps = plan.steps();
  const bool profile = OpProfile::enabled();
  for (size_t s = 0; s < steps.size(); ++s) {
    const PlanStep& step = steps[s];
    const Node& node = graph.nodes[static_cast<size_t>(step.node)];
    KernelArgs args{node,
                    b.step_inputs[s],
                    b.step_outputs[s],
                    step.scratch_offset >= 0 ? workspace_.get() + step.scratch_offset : nullptr,
                    b.step_inputs[s],
                    nullptr,
                    static_cast<int>(s),
                    step.state.get(),
                    resources_ ? resources_->kernel_counters() : nullptr,
                    resources_.get()};
    auto t0 = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    RANKD_RETURN_IF_ERROR(step.kernel(args));
    if (profile) {
      OpProfile::Record(OpProfile::Key(node.op, node.name),
                        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  // The first rows of each output (all of them unless the caller asked for fewer) are its first bytes.
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].bytes() > 0) {
      std::memcpy(outputs[i].raw(), b.views[static_cast<size_t>(graph.outputs[i])].raw(), outputs[i].bytes());
    }
  }
  return Status::Ok();
}

}  // namespace

std::unique_ptr<Executor> NewHostExecutor(std::shared_ptr<ModelResources> resources) {
  return std::make_unique<HostExecutor>(std::move(resources));
}

}  // namespace rankd
