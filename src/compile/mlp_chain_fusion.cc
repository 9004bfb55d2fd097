// A chain of Gemm layers ending in a narrow head (an MLP's last hidden layers and its score)
// becomes one MlpChain node, whose CUDA kernel keeps the hidden activations on chip: a small
// batch's last layers are each a few µs of launch and ramp for well under a µs of arithmetic.
#include "compile/passes.h"

#include "backend/activation.h"

namespace rankd {
namespace {

const PlanValue* ShapeOf(const std::vector<PlanValue>& shapes, int v) {
  return v >= 0 && static_cast<size_t>(v) < shapes.size() ? &shapes[static_cast<size_t>(v)] : nullptr;
}

// A Gemm y = act(x · Wᵀ + b) over FP32 values, W an [N, K] constant and b an [N] constant; its N
// and K, or {0, 0} for any other node.
std::pair<int64_t, int64_t> LayerShape(const Graph& graph, const Node& n, const std::vector<PlanValue>& shapes) {
  if (n.op != "Gemm" || n.NumInputs() != 3 || !n.HasInput(2) || n.outputs.size() != 1) return {0, 0};
  if (n.GetInt("transA", 0) != 0 || n.GetInt("transB", 0) != 1) return {0, 0};
  if (n.GetFloat("alpha", 1.0f) != 1.0f || n.GetFloat("beta", 1.0f) != 1.0f) return {0, 0};
  const Tensor* w = graph.FindConstant(n.inputs[1]);
  const Tensor* b = graph.FindConstant(n.inputs[2]);
  if (!w || !b || w->dtype() != DType::kF32 || b->dtype() != DType::kF32 || w->rank() != 2) return {0, 0};
  if (b->rank() != 1 || b->dim(0) != w->dim(0)) return {0, 0};
  const PlanValue* x = ShapeOf(shapes, n.inputs[0]);
  const PlanValue* y = ShapeOf(shapes, n.outputs[0]);
  if (!x || !y || x->dtype != DType::kF32 || x->shape.size() != 2 || x->shape[1] != w->dim(1)) return {0, 0};
  return {w->dim(0), w->dim(1)};
}

}  // namespace

int FuseMlpChains(Graph& graph, const std::vector<PlanValue>& shapes) {
  const std::vector<int> producers = graph.Producers();
  const std::vector<int> uses = graph.UseCounts();
  std::vector<bool> output(graph.values.size(), false);
  for (int o : graph.outputs) output[static_cast<size_t>(o)] = true;
  std::vector<bool> removed(graph.nodes.size(), false);
  int fused = 0;
  for (size_t h = 0; h < graph.nodes.size(); ++h) {
    const auto [n_head, k_head] = LayerShape(graph, graph.nodes[h], shapes);
    if (n_head < 1 || n_head > kMlpChainHeadWidth || k_head % kMlpChainColumns != 0) continue;
    // Walk back from the head while each layer's input is the last's result and read only there.
    std::vector<int> layers = {static_cast<int>(h)};
    int64_t weights = n_head * k_head;
    while (layers.size() < static_cast<size_t>(kMlpChainMaxLayers)) {
      const int x = graph.nodes[static_cast<size_t>(layers.back())].inputs[0];
      const int p = producers[static_cast<size_t>(x)];
      if (p < 0 || removed[static_cast<size_t>(p)] || uses[static_cast<size_t>(x)] != 1 || output[static_cast<size_t>(x)]) break;
      const auto [n, k] = LayerShape(graph, graph.nodes[static_cast<size_t>(p)], shapes);
      if (n == 0 || n % kMlpChainColumns != 0 || n > kMlpChainMaxWidth || k % kMlpChainColumns != 0 || k > kMlpChainMaxWidth) break;
      if (weights + n * k > kMlpChainMaxWeights) break;
      weights += n * k;
      layers.push_back(p);
    }
    if (layers.size() < 2) continue;
    // The head takes the chain's place: the first layer's input, then each layer's weight and bias.
    Node& head = graph.nodes[h];
    std::vector<int> inputs = {graph.nodes[static_cast<size_t>(layers.back())].inputs[0]};
    std::vector<int64_t> activations;
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
      const Node& layer = graph.nodes[static_cast<size_t>(*it)];
      inputs.push_back(layer.inputs[1]);
      inputs.push_back(layer.inputs[2]);
      activations.push_back(static_cast<int64_t>(ProductActivation(layer)));
      if (*it != static_cast<int>(h)) removed[static_cast<size_t>(*it)] = true;
    }
    head.op = "MlpChain";
    head.inputs = std::move(inputs);
    head.attrs.clear();
    head.attrs["activations"] = activations;
    ++fused;
  }
  if (fused > 0) graph.EraseNodes(removed);
  return fused;
}

}  // namespace rankd
