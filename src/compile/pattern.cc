#include "compile/pattern.h"

#include <algorithm>

namespace rankd {

const Shape* GraphPattern::ShapeOf(int v) const {
  const PlanValue* p = Planned(v);
  return p && p->dtype == DType::kF32 ? &p->shape : nullptr;
}

const PlanValue* GraphPattern::Planned(int v) const {
  if (v < 0 || static_cast<size_t>(v) >= shapes_.size()) return nullptr;
  const PlanValue& p = shapes_[static_cast<size_t>(v)];
  return p.dtype == DType::kInvalid ? nullptr : &p;
}

const Node* GraphPattern::Producer(int v) const {
  const int p = v < 0 ? -1 : producer_[static_cast<size_t>(v)];
  return p < 0 ? nullptr : &g_.nodes[static_cast<size_t>(p)];
}

const Node* GraphPattern::Take(int v, const char* op, std::vector<int>& absorbed) const {
  const int p = v < 0 ? -1 : producer_[static_cast<size_t>(v)];
  if (p < 0 || uses_[static_cast<size_t>(v)] != 1) return nullptr;
  const Node& n = g_.nodes[static_cast<size_t>(p)];
  if (n.op != op || n.outputs.size() != 1) return nullptr;
  absorbed.push_back(p);
  return &n;
}

std::vector<int64_t> GraphPattern::Axes(const Node& n, int64_t rank) const {
  std::vector<int64_t> axes = n.GetInts("axes");
  if (axes.empty() && n.HasInput(1)) {
    const Tensor* t = g_.FindConstant(n.inputs[1]);
    if (!t || (t->dtype() != DType::kI64 && t->dtype() != DType::kI32)) return {};
    for (int64_t i = 0; i < t->size(); ++i) axes.push_back(t->ScalarAsInt(i));
  }
  for (int64_t& a : axes) a = a < 0 ? a + rank : a;
  return axes;
}

std::pair<int, int> GraphPattern::Ungather(int v) const {
  const int p = v < 0 ? -1 : producer_[static_cast<size_t>(v)];
  if (p < 0) return {v, -1};
  const Node& n = g_.nodes[static_cast<size_t>(p)];
  if (n.op != "Gather" || n.GetInt("axis", 0) != 0 || n.inputs.size() != 2) return {v, -1};
  const int index = n.inputs[1];
  const bool request_index = std::find(g_.inputs.begin(), g_.inputs.end(), index) != g_.inputs.end() &&
                             g_.values[static_cast<size_t>(index)].name == "rankd.request_index";
  return request_index ? std::pair<int, int>{n.inputs[0], index} : std::pair<int, int>{v, -1};
}

bool GraphPattern::Scalar(int v, double& out) const {
  const Tensor* t = g_.FindConstant(v);
  if (!t || t->size() != 1) return false;
  out = t->ScalarAsDouble(0);
  return true;
}

void ApplyFusion(Graph& graph, size_t last, Fusion fusion) {
  std::vector<bool> removed(graph.nodes.size(), false);
  for (int a : fusion.absorbed) removed[static_cast<size_t>(a)] = true;
  for (FusionConstant& c : fusion.constants) {
    fusion.node.inputs[static_cast<size_t>(c.input)] = graph.AddConstant(c.name, std::move(c.value));
  }
  graph.nodes[last] = std::move(fusion.node);  // the last node's place: after every input
  graph.EraseNodes(removed);
}

}  // namespace rankd
