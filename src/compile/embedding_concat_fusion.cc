// Concat(parts, last axis) whose parts include embedding bags read only there becomes one
// ConcatEmbeddingBags: every bag pooled straight into its columns and the other parts copied
// into theirs, in one kernel (W1: 26 bag launches and a concatenation become one launch, and the
// 27 x 128-wide row is written once instead of twice).
#include <algorithm>

#include "compile/passes.h"

namespace rankd {

int FuseEmbeddingConcats(Graph& graph) {
  std::vector<int> producers = graph.Producers();
  std::vector<int> uses = graph.UseCounts();
  std::vector<bool> removed(graph.nodes.size(), false);
  int fused = 0;
  for (Node& concat : graph.nodes) {
    if (concat.op != "Concat" || concat.inputs.empty()) continue;
    int64_t axis = concat.GetInt("axis", 0);
    if (axis != 1 && axis != -1) continue;  // bags are [rows, dim]: only their last axis
    auto bag_of = [&](int value) -> const Node* {
      int p = value < 0 ? -1 : producers[static_cast<size_t>(value)];
      if (p < 0 || removed[static_cast<size_t>(p)] || uses[static_cast<size_t>(value)] != 1) return nullptr;
      const Node& n = graph.nodes[static_cast<size_t>(p)];
      return n.op == "EmbeddingBag" && n.outputs.size() == 1 ? &n : nullptr;
    };
    int bags = 0;
    for (size_t i = 0; i < concat.inputs.size(); ++i) {
      // The same bag twice would be read twice: both stay copies.
      bool repeated = std::count(concat.inputs.begin(), concat.inputs.end(), concat.inputs[i]) > 1;
      if (!repeated && bag_of(concat.inputs[i])) ++bags;
    }
    // A bag among the parts makes every part rank 2 and FP32 (Concat requires it of all).
    if (bags == 0) continue;
    std::vector<int> inputs;
    std::vector<int64_t> parts, modes;
    for (int value : concat.inputs) {
      const Node* bag = std::count(concat.inputs.begin(), concat.inputs.end(), value) > 1 ? nullptr : bag_of(value);
      if (bag) {
        inputs.insert(inputs.end(), bag->inputs.begin(), bag->inputs.end());
        parts.push_back(static_cast<int64_t>(bag->inputs.size()));
        modes.push_back(bag->GetString("mode", "sum") == "mean" ? 1 : 0);
        removed[static_cast<size_t>(producers[static_cast<size_t>(value)])] = true;
      } else {
        inputs.push_back(value);
        parts.push_back(1);
        modes.push_back(0);
      }
    }
    concat.op = "ConcatEmbeddingBags";
    concat.inputs = std::move(inputs);
    concat.attrs = {{"parts", parts}, {"modes", modes}};
    ++fused;
  }
  if (fused > 0) graph.EraseNodes(removed);
  return fused;
}

}  // namespace rankd
