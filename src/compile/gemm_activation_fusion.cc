// Gemm followed by Relu becomes one Gemm with activation="Relu": the CUDA backend applies it in the
// cuBLASLt epilogue (one launch, no extra pass over the output), the CPU right after the product.
#include <algorithm>

#include "compile/passes.h"

namespace rankd {

int FuseGemmActivations(Graph& graph) {
  std::vector<int> producers = graph.Producers();
  std::vector<int> uses = graph.UseCounts();
  std::vector<bool> removed(graph.nodes.size(), false);
  int fused = 0;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& relu = graph.nodes[n];
    if (relu.op != "Relu" || relu.inputs.size() != 1 || relu.inputs[0] < 0) continue;
    int product = relu.inputs[0];
    int p = producers[static_cast<size_t>(product)];
    if (p < 0) continue;
    Node& gemm = graph.nodes[static_cast<size_t>(p)];
    // Only when the Relu is the product's one reader (and the product is not a graph output).
    if (gemm.op != "Gemm" || gemm.Has("activation") || uses[static_cast<size_t>(product)] != 1) continue;
    gemm.attrs["activation"] = std::string("Relu");
    gemm.outputs[0] = relu.outputs[0];
    removed[n] = true;
    ++fused;
  }
  if (fused == 0) return 0;
  std::vector<Node> kept;
  kept.reserve(graph.nodes.size() - static_cast<size_t>(fused));
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (!removed[n]) kept.push_back(std::move(graph.nodes[n]));
  }
  graph.nodes = std::move(kept);
  return fused;
}

}  // namespace rankd
