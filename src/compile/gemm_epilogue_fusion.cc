// Products whose result is only biased and/or rectified (or put through a tanh-approximated GELU
// or a sigmoid) take the bias and the activation into the product: the CUDA backend applies them
// in the cuBLASLt epilogue or its own product kernel (one launch, no extra pass over the output;
// cuBLASLt has no sigmoid, which then takes a pass of its own), the CPU right after the product.
#include <algorithm>

#include "compile/passes.h"

namespace rankd {
namespace {

class EpilogueFuser {
 public:
  explicit EpilogueFuser(Graph& g) : g_(g), uses_(g.UseCounts()) {}

  int Run() {
    removed_.assign(g_.nodes.size(), false);
    for (size_t n = 0; n < g_.nodes.size(); ++n) {
      if (removed_[n]) continue;
      Node& node = g_.nodes[n];
      if (node.op == "MatMul") FuseBias(node);
      if (TakesActivation(node) && !FuseActivation(node, "Relu") && !FuseActivation(node, "Sigmoid"))
        FuseGeluTanh(node);
    }
    if (fused_ > 0) g_.EraseNodes(removed_);
    return fused_;
  }

 private:
  // The node that alone reads `value` (not a graph output), or -1.
  int OnlyReader(int value) const {
    if (uses_[static_cast<size_t>(value)] != 1) return -1;
    for (size_t n = 0; n < g_.nodes.size(); ++n) {
      if (!removed_[n] && Reads(g_.nodes[n], value)) return static_cast<int>(n);
    }
    return -1;
  }

  // MatMul(a, W) + b, W a constant FP32 matrix [K, H] and b a constant FP32 row of H ([H] or
  // [1, ..., 1, H], no wider than the product): MatMul(a, W, b[H]).
  void FuseBias(Node& mm) {
    if (mm.inputs.size() != 2 || !g_.IsConstant(mm.inputs[1])) return;
    const Tensor& w = g_.constants.at(mm.inputs[1]);
    if (w.rank() != 2 || w.dtype() != DType::kF32 || w.dim(0) == 0) return;
    int r = OnlyReader(mm.outputs[0]);
    if (r < 0) return;
    const Node& add = g_.nodes[static_cast<size_t>(r)];
    if (add.op != "Add" || add.inputs.size() != 2) return;
    int bias = add.inputs[0] == mm.outputs[0] ? add.inputs[1] : add.inputs[0];
    if (bias < 0 || bias == mm.outputs[0] || !g_.IsConstant(bias)) return;
    const Tensor& b = g_.constants.at(bias);
    if (b.dtype() != DType::kF32 || b.rank() < 1 || b.size() != w.dim(1) || b.shape().back() != w.dim(1)) return;
    // The product has a's rank; a wider bias would widen the sum.
    const Value& a = g_.values[static_cast<size_t>(mm.inputs[0])];
    if (b.rank() > 1 && (!a.rank_known || b.rank() > static_cast<int64_t>(a.shape.size()))) return;
    Tensor row = Tensor::Zeros(DType::kF32, {w.dim(1)});
    std::copy(b.data<float>(), b.data<float>() + b.size(), row.data<float>());
    mm.inputs.push_back(g_.AddConstant(mm.name + ".bias", std::move(row)));
    mm.outputs[0] = add.outputs[0];
    removed_[static_cast<size_t>(r)] = true;
    ++fused_;
  }

  // A product an activation can go into: a Gemm, or a MatMul whose B is one matrix (the CUDA
  // backend applies an epilogue to a single product, not to a batch of them: cuda/matmul.cc). A
  // MatMul of two batched activations (a two-tower score, attention) keeps its activation node.
  bool TakesActivation(const Node& product) const {
    if (product.op == "Gemm") return true;
    if (product.op != "MatMul" || product.inputs.size() < 2) return false;
    const int b = product.inputs[1];
    if (g_.IsConstant(b)) return g_.constants.at(b).rank() <= 2;
    const Value& v = g_.values[static_cast<size_t>(b)];
    return v.rank_known && v.shape.size() <= 2;
  }

  // The product's only reader is the one-input activation `op` (Relu, Sigmoid).
  bool FuseActivation(Node& product, const char* op) {
    if (product.Has("activation")) return false;
    int r = OnlyReader(product.outputs[0]);
    if (r < 0 || g_.nodes[static_cast<size_t>(r)].op != op) return false;
    product.attrs["activation"] = std::string(op);
    product.outputs[0] = g_.nodes[static_cast<size_t>(r)].outputs[0];
    removed_[static_cast<size_t>(r)] = true;
    ++fused_;
    return true;
  }

  // The product's readers are the nodes of one lowered tanh Gelu of it (gelu_lowering.cc), and
  // nothing outside those nodes reads what they make, but for the Gelu's output.
  bool FuseGeluTanh(Node& product) {
    const int x = product.outputs[0];
    if (product.Has("activation") || IsGraphOutput(x)) return false;
    int64_t gelu = -1;  // the Gelu's output, from the tag of x's first reader
    for (size_t n = 0; n < g_.nodes.size(); ++n) {
      if (removed_[n] || !Reads(g_.nodes[n], x)) continue;
      gelu = g_.nodes[n].GetInt(kLoweredGeluTanh, -1);
      break;
    }
    if (gelu < 0) return false;
    std::vector<size_t> group;
    std::vector<int> made;  // by the group, its output aside
    for (size_t n = 0; n < g_.nodes.size(); ++n) {
      if (removed_[n] || g_.nodes[n].GetInt(kLoweredGeluTanh, -1) != gelu) continue;
      group.push_back(n);
      for (int out : g_.nodes[n].outputs) {
        if (out != gelu) made.push_back(out);
      }
    }
    for (int v : made) {
      if (IsGraphOutput(v)) return false;
    }
    made.push_back(x);
    for (size_t n = 0; n < g_.nodes.size(); ++n) {
      if (removed_[n] || std::find(group.begin(), group.end(), n) != group.end()) continue;
      for (int v : made) {
        if (Reads(g_.nodes[n], v)) return false;  // x, or a value inside the Gelu, read elsewhere
      }
    }
    product.attrs["activation"] = std::string("GeluTanh");
    product.outputs[0] = static_cast<int>(gelu);
    for (size_t n : group) removed_[n] = true;
    ++fused_;
    return true;
  }

  static bool Reads(const Node& node, int value) {
    return std::find(node.inputs.begin(), node.inputs.end(), value) != node.inputs.end();
  }

  bool IsGraphOutput(int value) const {
    return std::find(g_.outputs.begin(), g_.outputs.end(), value) != g_.outputs.end();
  }

  Graph& g_;
  std::vector<int> uses_;
  std::vector<bool> removed_;
  int fused_ = 0;
};

}  // namespace

int FuseGemmEpilogues(Graph& graph) { return EpilogueFuser(graph).Run(); }

}  // namespace rankd
