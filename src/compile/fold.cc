// Constant folding and dead-node removal.
#include "compile/evaluate.h"
#include "compile/passes.h"

namespace rankd {

StatusOr<int> FoldConstants(Graph& graph, int64_t max_bytes) {
  int folded = 0;
  std::vector<Node> kept;
  for (Node& node : graph.nodes) {
    bool all_constant = !node.inputs.empty();
    for (int in : node.inputs) all_constant = all_constant && (in < 0 || graph.IsConstant(in));
    if (!all_constant || node.op == "RaggedToPadded") {
      kept.push_back(std::move(node));
      continue;
    }
    std::vector<const Tensor*> inputs;
    for (int in : node.inputs) inputs.push_back(in < 0 ? nullptr : &graph.constants.at(in));
    auto outs = EvaluateNode(node, inputs, nullptr, max_bytes);
    if (outs.status().code() == StatusCode::kResourceExhausted) {  // too large to keep folded
      kept.push_back(std::move(node));
      continue;
    }
    if (!outs.ok()) return outs.status();
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      int id = node.outputs[o];
      if (id < 0) continue;
      Value& v = graph.values[static_cast<size_t>(id)];
      v.dtype = (*outs)[o].dtype();
      v.shape = (*outs)[o].shape();
      v.rank_known = true;
      graph.constants[id] = std::move((*outs)[o]);
    }
    ++folded;
  }
  graph.nodes = std::move(kept);
  return folded;
}

int RemoveDeadNodes(Graph& graph) {
  std::vector<bool> live(graph.values.size(), false);
  for (int out : graph.outputs) live[static_cast<size_t>(out)] = true;
  std::vector<bool> keep(graph.nodes.size(), false);
  for (size_t n = graph.nodes.size(); n-- > 0;) {
    const Node& node = graph.nodes[n];
    for (int out : node.outputs) keep[n] = keep[n] || (out >= 0 && live[static_cast<size_t>(out)]);
    if (!keep[n]) continue;
    for (int in : node.inputs) {
      if (in >= 0) live[static_cast<size_t>(in)] = true;
    }
  }
  std::vector<Node> kept;
  int removed = 0;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (keep[n])
      kept.push_back(std::move(graph.nodes[n]));
    else
      ++removed;
  }
  graph.nodes = std::move(kept);
  // Constants nothing reads any more (weights of removed nodes) are released.
  for (auto it = graph.constants.begin(); it != graph.constants.end();) {
    if (!live[static_cast<size_t>(it->first)])
      it = graph.constants.erase(it);
    else
      ++it;
  }
  return removed;
}

}  // namespace rankd
