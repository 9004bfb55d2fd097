// A layer norm written out op by op, as PyTorch exports nn.LayerNorm below opset 17:
//
//   u = ReduceMean(x, axes=[-1]);  d = x - u
//   y = d / Sqrt(ReduceMean(Pow(d, 2) or d * d, axes=[-1]) + eps) * gamma + beta
//
// becomes LayerNormalization(x, gamma, beta, axis=-1, epsilon=eps): one kernel (a warp per row on
// CUDA) instead of nine launches and four passes over x. The intermediates must be read only inside
// the pattern; gamma and beta FP32 constant vectors; eps an FP32 scalar constant.
#include <cmath>

#include "compile/passes.h"

namespace rankd {
namespace {

class Matcher {
 public:
  explicit Matcher(Graph& graph) : graph_(graph), producers_(graph.Producers()), uses_(graph.UseCounts()) {}

  int Run() {
    std::vector<bool> removed(graph_.nodes.size(), false);
    int fused = 0;
    for (size_t r = 0; r < graph_.nodes.size(); ++r) {
      std::vector<int> members;
      Node ln;
      if (removed[r] || !Match(static_cast<int>(r), &members, &ln)) continue;
      bool free = true;
      for (int m : members) free = free && !removed[static_cast<size_t>(m)];
      if (!free) continue;
      for (int m : members) removed[static_cast<size_t>(m)] = true;
      ln.outputs = graph_.nodes[r].outputs;
      graph_.nodes[r] = std::move(ln);
      removed[r] = false;
      ++fused;
    }
    if (fused > 0) graph_.EraseNodes(removed);
    return fused;
  }

 private:
  // The node producing `v` if it is `op` and its output is read `uses` times; else -1.
  int Producer(int v, const char* op, int uses = 1) const {
    if (v < 0) return -1;
    int p = producers_[static_cast<size_t>(v)];
    if (p < 0 || graph_.nodes[static_cast<size_t>(p)].op != op || uses_[static_cast<size_t>(v)] != uses) return -1;
    return p;
  }
  const Tensor* Constant(int v) const {  // FP32 only: the fused node reads its operands as FP32
    const Tensor* t = graph_.FindConstant(v);
    return t && t->dtype() == DType::kF32 ? t : nullptr;
  }
  bool ScalarIs(int v, float want) const { return Constant(v) && graph_.ScalarConstant(v) == double{want}; }
  // One of a binary node's inputs satisfies `pick` (which receives it); `other` gets the other.
  template <typename Pick>
  bool EitherSide(const Node& n, Pick pick, int* other) const {
    for (int side = 0; side < 2; ++side) {
      if (pick(n.Input(side))) {
        *other = n.Input(1 - side);
        return true;
      }
    }
    return false;
  }
  // ReduceMean over the last axis keeping it (axes as the attribute, or as a constant input).
  bool MeanOverLast(int n) const {
    const Node& node = graph_.nodes[static_cast<size_t>(n)];
    if (node.GetInt("keepdims", 1) == 0) return false;
    std::vector<int64_t> axes = node.GetInts("axes");
    if (node.HasInput(1)) {
      const Tensor* t = graph_.FindConstant(node.Input(1));
      if (!t || t->dtype() != DType::kI64 || t->size() != 1) return false;
      axes = {t->data<int64_t>()[0]};
    }
    return axes == std::vector<int64_t>{-1};
  }
  bool Vector(int v) const {
    const Tensor* t = Constant(v);
    return t && t->rank() == 1;
  }

  bool Match(int root, std::vector<int>* members, Node* ln) const {
    const Node& add = graph_.nodes[static_cast<size_t>(root)];
    if (add.op != "Add" || add.inputs.size() != 2) return false;
    int beta = -1, mul = -1, gamma = -1, div = -1;
    if (!EitherSide(
            add, [&](int v) { return (mul = Producer(v, "Mul")) >= 0; }, &beta) ||
        !Vector(beta))
      return false;
    const Node& m = graph_.nodes[static_cast<size_t>(mul)];
    if (!EitherSide(
            m, [&](int v) { return (div = Producer(v, "Div")) >= 0; }, &gamma) ||
        !Vector(gamma))
      return false;
    const Node& dv = graph_.nodes[static_cast<size_t>(div)];
    const int d = dv.Input(0);
    int sqrt = Producer(dv.Input(1), "Sqrt");
    if (d < 0 || sqrt < 0) return false;
    int eps_add = Producer(graph_.nodes[static_cast<size_t>(sqrt)].Input(0), "Add");
    if (eps_add < 0) return false;
    int var = -1, eps = -1;
    if (!EitherSide(
            graph_.nodes[static_cast<size_t>(eps_add)], [&](int v) { return (var = Producer(v, "ReduceMean")) >= 0; },
            &eps))
      return false;
    const Tensor* eps_t = Constant(eps);
    if (!eps_t || eps_t->size() != 1 || !MeanOverLast(var)) return false;
    // The square: Pow(d, 2) (d read by it and the Div) or Mul(d, d) (read twice there).
    const int square_in = graph_.nodes[static_cast<size_t>(var)].Input(0);
    int square = Producer(square_in, "Pow");
    if (square >= 0) {
      const Node& p = graph_.nodes[static_cast<size_t>(square)];
      if (p.Input(0) != d || !ScalarIs(p.Input(1), 2.0f)) return false;
    } else {
      square = Producer(square_in, "Mul");
      if (square < 0) return false;
      const Node& p = graph_.nodes[static_cast<size_t>(square)];
      if (p.Input(0) != d || p.Input(1) != d) return false;
    }
    const int d_reads = graph_.nodes[static_cast<size_t>(square)].op == "Pow" ? 2 : 3;
    int sub = Producer(d, "Sub", d_reads);
    if (sub < 0) return false;
    const Node& s = graph_.nodes[static_cast<size_t>(sub)];
    int mean = Producer(s.Input(1), "ReduceMean");
    if (mean < 0 || s.Input(0) < 0 || !MeanOverLast(mean) ||
        graph_.nodes[static_cast<size_t>(mean)].Input(0) != s.Input(0))
      return false;
    *members = {mean, sub, square, var, eps_add, sqrt, div, mul};
    ln->op = "LayerNormalization";
    ln->name = add.name + ".layer_norm";
    ln->inputs = {s.inputs[0], gamma, beta};
    ln->attrs["axis"] = int64_t{-1};
    ln->attrs["epsilon"] = eps_t->data<float>()[0];
    return true;
  }

  Graph& graph_;
  std::vector<int> producers_, uses_;
};

}  // namespace

int FuseDecomposedLayerNorms(Graph& graph) { return Matcher(graph).Run(); }

}  // namespace rankd
