#include "compile/plan.h"

#include <algorithm>
#include <atomic>

#include "compile/evaluate.h"

namespace rankd {
namespace {

constexpr int64_t kAlign = 64;
int64_t AlignUp(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

StatusOr<std::shared_ptr<const Plan>> Plan::Build(const Graph& graph, const std::vector<TensorMeta>& inputs,
                                                  const PlanOptions& options) {
  static std::atomic<uint64_t> next_id{1};
  std::shared_ptr<Plan> plan(new Plan());
  plan->graph_ = &graph;
  plan->id_ = next_id++;
  auto& values = plan->values_;
  values.resize(graph.values.size());
  if (inputs.size() != graph.inputs.size()) {
    return Internal("plan built with " + std::to_string(inputs.size()) + " inputs for a graph of " +
                    std::to_string(graph.inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    PlanValue& v = values[static_cast<size_t>(graph.inputs[i])];
    v.dtype = inputs[i].dtype;
    v.shape = inputs[i].shape;
    v.storage = PlanStorage::kInput;
    v.input_index = static_cast<int>(i);
  }
  for (const auto& [id, tensor] : graph.constants) {
    PlanValue& v = values[static_cast<size_t>(id)];
    v = {tensor.dtype(), tensor.shape(), PlanStorage::kConstant, -1, &tensor, -1, -1};
  }
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    const OpSchema* schema = FindOpSchema(node.op);
    const Kernel* kernel = options.backend->FindKernel(node.op);
    if (!schema || !kernel || !kernel->run) {
      return Unimplemented(node.Describe() + ": op " + node.op + " is not supported by the " + options.backend->name() +
                           " backend");
    }
    InferContext ctx{node, {}, {}, 0, &options.ragged_max_lengths};
    bool all_known = true;
    for (int in : node.inputs) {
      if (in < 0) {
        ctx.inputs.push_back({});
        continue;
      }
      const PlanValue& v = values[static_cast<size_t>(in)];
      if (v.storage == PlanStorage::kUnused) return Internal(node.Describe() + " reads a value never planned");
      ctx.inputs.push_back({v.dtype, v.shape, v.storage == PlanStorage::kConstant ? v.constant : nullptr});
      all_known = all_known && v.storage == PlanStorage::kConstant;
    }
    RANKD_RETURN_IF_ERROR(InferNode(*schema, ctx));
    if (all_known || node.op == "Shape") {
      // Computable now: fold it. Shape needs only the input's shape, so it gets a data-less view.
      std::vector<Tensor> metas;
      std::vector<const Tensor*> in_ptrs;
      metas.reserve(ctx.inputs.size());
      for (const TensorMeta& m : ctx.inputs) {
        metas.push_back(m.value ? *m.value : Tensor::View(m.dtype, m.shape, nullptr));
        in_ptrs.push_back(m.present() ? &metas.back() : nullptr);
      }
      RANKD_ASSIGN_OR_RETURN(std::vector<Tensor> outs, EvaluateNode(node, in_ptrs, &options.ragged_max_lengths));
      for (size_t o = 0; o < outs.size(); ++o) {
        int id = node.outputs[o];
        if (id < 0) continue;
        plan->folded_.push_back(std::move(outs[o]));
        const Tensor* t = &plan->folded_.back();
        values[static_cast<size_t>(id)] = {t->dtype(), t->shape(), PlanStorage::kConstant, -1, t, -1, -1};
      }
      ++plan->folded_nodes_;
      continue;
    }
    PlanStep step;
    step.node = static_cast<int>(n);
    step.kernel = kernel->run;
    step.inputs = node.inputs;
    step.outputs = node.outputs;
    step.scratch_bytes = ctx.scratch_bytes;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      int id = node.outputs[o];
      if (id < 0) continue;
      int64_t elems = 1;
      for (int64_t d : ctx.outputs[o].shape) {
        if (d != 0 && elems > options.max_workspace_bytes / d)
          elems = options.max_workspace_bytes + 1;
        else
          elems *= d;
      }
      if (elems * static_cast<int64_t>(DTypeSize(ctx.outputs[o].dtype)) > options.max_workspace_bytes) {
        return ResourceExhausted(node.Describe() + ": output " + ShapeToString(ctx.outputs[o].shape) + " is too large");
      }
      PlanValue& v = values[static_cast<size_t>(id)];
      v.dtype = ctx.outputs[o].dtype;
      v.shape = ctx.outputs[o].shape;
      if (o == 0 && (schema->aliases_input || (schema->moves_no_data && schema->moves_no_data(ctx)))) {
        const PlanValue& src = values[static_cast<size_t>(node.inputs[0])];
        v.storage = PlanStorage::kAlias;
        v.alias_of = src.storage == PlanStorage::kAlias ? src.alias_of : node.inputs[0];
        step.kernel = nullptr;  // no work
      } else {
        v.storage = PlanStorage::kWorkspace;
      }
    }
    if (!step.kernel) continue;
    if (kernel->prepare) {
      RANKD_ASSIGN_OR_RETURN(step.state, kernel->prepare(node));
    }
    plan->steps_.push_back(std::move(step));
  }
  RANKD_RETURN_IF_ERROR(plan->AssignMemory(options.max_workspace_bytes, options.backend->SeparateRoomBytes()));
  return std::shared_ptr<const Plan>(plan);
}

Status Plan::AssignMemory(int64_t max_workspace_bytes, int64_t separate_room_bytes) {
  // Backward liveness: keep steps whose outputs reach a graph output.
  const Graph& g = *graph_;
  std::vector<bool> needed(values_.size(), false);
  auto mark = [&](int id) {
    if (id < 0) return;
    needed[static_cast<size_t>(id)] = true;
    const PlanValue& v = values_[static_cast<size_t>(id)];
    if (v.storage == PlanStorage::kAlias) needed[static_cast<size_t>(v.alias_of)] = true;
  };
  for (int out : g.outputs) mark(out);
  std::vector<PlanStep> kept;
  for (size_t s = steps_.size(); s-- > 0;) {
    bool live = false;
    for (int out : steps_[s].outputs) live = live || (out >= 0 && needed[static_cast<size_t>(out)]);
    if (!live) continue;
    for (int in : steps_[s].inputs) mark(in);
    kept.push_back(std::move(steps_[s]));
  }
  std::reverse(kept.begin(), kept.end());
  steps_ = std::move(kept);

  // Lifetimes in step indices; graph outputs live past the last step.
  const int64_t end = static_cast<int64_t>(steps_.size());
  std::vector<int64_t> first(values_.size(), -1), last(values_.size(), -1);
  auto root = [&](int id) { return RootOf(id); };
  for (int64_t s = 0; s < end; ++s) {
    for (int out : steps_[static_cast<size_t>(s)].outputs) {
      if (out >= 0 && first[static_cast<size_t>(out)] < 0) first[static_cast<size_t>(out)] = s;
      if (out >= 0) last[static_cast<size_t>(out)] = std::max(last[static_cast<size_t>(out)], s);
    }
    for (int in : steps_[static_cast<size_t>(s)].inputs) {
      if (in >= 0) last[static_cast<size_t>(root(in))] = s;
    }
  }
  for (int out : g.outputs) last[static_cast<size_t>(root(out))] = end;

  struct Block {
    int64_t bytes, first, last;
    int64_t* offset;
  };
  std::vector<Block> blocks;
  for (size_t id = 0; id < values_.size(); ++id) {
    PlanValue& v = values_[id];
    if (v.storage != PlanStorage::kWorkspace || first[id] < 0) continue;
    int64_t bytes = AlignUp(std::max<int64_t>(NumElements(v.shape) * static_cast<int64_t>(DTypeSize(v.dtype)), 1));
    blocks.push_back({bytes, first[id], last[id], &v.offset});
  }
  for (int64_t s = 0; s < end; ++s) {
    PlanStep& step = steps_[static_cast<size_t>(s)];
    if (step.scratch_bytes > 0) blocks.push_back({AlignUp(step.scratch_bytes), s, s, &step.scratch_offset});
  }
  // Small enough: every block in its own room. Otherwise greedy by size: each block takes the
  // lowest offset that overlaps no placed block alive at the same time.
  int64_t separate = 0;
  for (const Block& b : blocks) separate += b.bytes;
  separate_rooms_ = separate_room_bytes > 0 && separate <= separate_room_bytes;
  if (separate_rooms_) {
    for (Block& b : blocks) {
      b.first = 0;
      b.last = end;
    }
  }
  std::vector<size_t> order(blocks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return blocks[a].bytes > blocks[b].bytes; });
  std::vector<size_t> placed;
  int64_t total = 0;
  for (size_t i : order) {
    Block& b = blocks[i];
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed) {
      const Block& p = blocks[j];
      if (p.first <= b.last && b.first <= p.last) busy.push_back({*p.offset, *p.offset + p.bytes});
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [lo, hi] : busy) {
      if (offset + b.bytes <= lo) break;
      offset = std::max(offset, hi);
    }
    *b.offset = offset;
    total = std::max(total, offset + b.bytes);
    placed.push_back(i);
  }
  workspace_bytes_ = total;
  if (total > max_workspace_bytes) {
    return ResourceExhausted("the plan needs " + std::to_string(total) + " bytes of workspace; the limit is " +
                             std::to_string(max_workspace_bytes));
  }
  return Status::Ok();
}

}  // namespace rankd
