#include "compile/narrowable_ids.h"

#include <algorithm>
#include <limits>

#include "compile/plan.h"

namespace rankd {
namespace {

constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();

// Whether input `slot` of `node` is the ids of a bag over a table of at most kMax32 rows.
bool IdsSlotOfSmallTable(const Node& node, size_t slot, const std::vector<int>& inputs, const Plan& plan) {
  auto small_table = [&](size_t table_slot) {
    const PlanValue& t = plan.values()[static_cast<size_t>(inputs[table_slot])];
    return !t.shape.empty() && t.shape[0] <= kMax32;
  };
  if (node.op == "EmbeddingBag") return slot == 1 && small_table(0);
  if (node.op != "ConcatEmbeddingBags") return false;
  size_t first = 0;
  for (int64_t count : node.GetInts("parts")) {
    if (count >= 2 && slot == first + 1) return small_table(first);
    first += static_cast<size_t>(count);
  }
  return false;
}

}  // namespace

std::vector<bool> NarrowableIdInputs(const Plan& plan) {
  const Graph& graph = plan.graph();
  const auto& values = plan.values();
  // graph input index by value id (roots only: an alias reads its root's bytes)
  std::vector<int> input_of(values.size(), -1);
  std::vector<bool> narrow(graph.inputs.size(), false);
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const int id = graph.inputs[i];
    input_of[static_cast<size_t>(id)] = static_cast<int>(i);
    narrow[i] = values[static_cast<size_t>(id)].dtype == DType::kI64;
  }
  auto input_behind = [&](int v) { return v < 0 ? -1 : input_of[static_cast<size_t>(plan.RootOf(v))]; };
  std::vector<bool> read(graph.inputs.size(), false);
  for (const PlanStep& step : plan.steps()) {
    const Node& node = graph.nodes[static_cast<size_t>(step.node)];
    for (size_t slot = 0; slot < step.inputs.size(); ++slot) {
      const int in = input_behind(step.inputs[slot]);
      if (in < 0) continue;
      read[static_cast<size_t>(in)] = true;
      if (!IdsSlotOfSmallTable(node, slot, step.inputs, plan)) narrow[static_cast<size_t>(in)] = false;
    }
  }
  for (int out : graph.outputs) {  // handed back as it came
    const int in = input_behind(out);
    if (in >= 0) narrow[static_cast<size_t>(in)] = false;
  }
  for (size_t i = 0; i < narrow.size(); ++i) narrow[i] = narrow[i] && read[i];
  return narrow;
}

}  // namespace rankd
