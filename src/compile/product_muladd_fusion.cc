// MulAdd(m, P, c) with P a product by a weight matrix becomes that product with a multiply-add
// epilogue, P's inputs then m and c: DCNv2's cross layer x0 * (W h + b) + x as one node, so that
// a backend may apply x0 * . + x where the product's tile is still in registers (the product
// neither written nor read back) and, at worst, run the two kernels it ran before.
#include "compile/passes.h"

namespace rankd {
namespace {

const PlanValue* ShapeOf(const std::vector<PlanValue>& shapes, int v) {
  return v >= 0 && static_cast<size_t>(v) < shapes.size() ? &shapes[static_cast<size_t>(v)] : nullptr;
}

// A Gemm, or a MatMul by a constant matrix, with no epilogue of this kind yet.
bool IsWeightProduct(const Graph& graph, const Node& n, const std::vector<PlanValue>& shapes) {
  if (n.outputs.size() != 1 || n.HasInput(3) || n.HasInput(4) || n.NumInputs() < 2) return false;
  if (n.op == "Gemm") return true;
  if (n.op != "MatMul" || !graph.IsConstant(n.inputs[1])) return false;
  const PlanValue* b = ShapeOf(shapes, n.inputs[1]);
  return b && b->shape.size() == 2;
}

}  // namespace

int FuseProductMulAdds(Graph& graph, const std::vector<PlanValue>& shapes) {
  std::vector<int> producers = graph.Producers();
  std::vector<int> uses = graph.UseCounts();
  std::vector<bool> removed(graph.nodes.size(), false);
  int fused = 0;
  for (Node& muladd : graph.nodes) {
    if (muladd.op != "MulAdd" || muladd.inputs.size() != 3 || muladd.outputs.size() != 1) continue;
    const PlanValue* out = ShapeOf(shapes, muladd.outputs[0]);
    if (!out || out->dtype != DType::kF32) continue;
    auto same = [&](int v) {
      const PlanValue* s = ShapeOf(shapes, v);
      return s && s->dtype == DType::kF32 && s->shape == out->shape;
    };
    if (!same(muladd.inputs[0]) || !same(muladd.inputs[1]) || !same(muladd.inputs[2])) continue;
    for (int side = 0; side < 2; ++side) {
      const int product = muladd.inputs[static_cast<size_t>(side)];
      const int p = producers[static_cast<size_t>(product)];
      if (p < 0 || removed[static_cast<size_t>(p)] || uses[static_cast<size_t>(product)] != 1) continue;
      const Node& node = graph.nodes[static_cast<size_t>(p)];
      if (!IsWeightProduct(graph, node, shapes)) continue;
      // The product moves to the MulAdd's place, after every value it now reads.
      std::vector<int> inputs = node.inputs;
      inputs.resize(3, -1);
      inputs.push_back(muladd.inputs[static_cast<size_t>(1 - side)]);
      inputs.push_back(muladd.inputs[2]);
      muladd.op = node.op;
      muladd.name = node.name;
      muladd.attrs = node.attrs;
      muladd.inputs = std::move(inputs);
      removed[static_cast<size_t>(p)] = true;
      ++fused;
      break;
    }
  }
  if (fused > 0) graph.EraseNodes(removed);
  return fused;
}

}  // namespace rankd
