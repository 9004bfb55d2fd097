// Add(Mul(a, b), c) becomes MulAdd(a, b, c): one pass over the output instead of two, and no
// product written and read back (DCNv2's x0 * (W x + b) + x, three times per batch in W1).
#include "compile/passes.h"

namespace rankd {

int FuseMulAdd(Graph& graph, const std::vector<PlanValue>& shapes) {
  std::vector<int> producers = graph.Producers();
  std::vector<int> uses = graph.UseCounts();
  auto fp32 = [&](int v) {
    return v >= 0 && static_cast<size_t>(v) < shapes.size() && shapes[static_cast<size_t>(v)].dtype == DType::kF32;
  };
  std::vector<bool> removed(graph.nodes.size(), false);
  int fused = 0;
  for (Node& add : graph.nodes) {
    if (add.op != "Add" || add.inputs.size() != 2 || !fp32(add.outputs[0])) continue;
    for (int side = 0; side < 2; ++side) {
      int product = add.inputs[static_cast<size_t>(side)];
      int p = product < 0 ? -1 : producers[static_cast<size_t>(product)];
      if (p < 0 || removed[static_cast<size_t>(p)] || uses[static_cast<size_t>(product)] != 1) continue;
      const Node& mul = graph.nodes[static_cast<size_t>(p)];
      if (mul.op != "Mul" || mul.inputs.size() != 2 || !fp32(mul.inputs[0]) || !fp32(mul.inputs[1])) continue;
      int addend = add.inputs[static_cast<size_t>(1 - side)];
      if (!fp32(addend)) continue;
      add.op = "MulAdd";
      add.inputs = {mul.inputs[0], mul.inputs[1], addend};
      removed[static_cast<size_t>(p)] = true;
      ++fused;
      break;
    }
  }
  if (fused > 0) graph.EraseNodes(removed);
  return fused;
}

}  // namespace rankd
