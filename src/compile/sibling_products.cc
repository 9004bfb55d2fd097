// Products of one input by different constant weights (MMoE's experts and gates, attention's
// query, key and value projections) as one product by their weights side by side, its columns
// sliced apart (docs/passes.md).
#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <type_traits>
#include <variant>

#include "compile/lowering.h"
#include "compile/passes.h"

namespace rankd {
namespace {

// A product the merge takes: Gemm(a, W, c?) or MatMul(a, W, c?), W a constant FP32 matrix and c,
// where present, a constant FP32 row of W's columns.
struct Sibling {
  size_t node = 0;
  int64_t k = 0, n = 0;  // W's inner and outer sizes
  bool trans_b = false;  // W is [n, k]
};

std::optional<Sibling> AsSibling(const Graph& g, size_t index) {
  const Node& node = g.nodes[index];
  const bool gemm = node.op == "Gemm";
  if ((!gemm && node.op != "MatMul") || node.inputs.size() < 2 || node.inputs.size() > 3 || node.outputs.size() != 1 ||
      node.inputs[0] < 0)
    return std::nullopt;
  if (gemm && (node.GetInt("transA", 0) != 0 || node.GetFloat("alpha", 1.0f) != 1.0f ||
               (node.HasInput(2) && node.GetFloat("beta", 1.0f) != 1.0f)))
    return std::nullopt;
  const Tensor* w = g.FindConstant(node.inputs[1]);
  if (!w || w->dtype() != DType::kF32 || w->rank() != 2) return std::nullopt;
  Sibling s;
  s.node = index;
  s.trans_b = gemm && node.GetInt("transB", 0) != 0;
  s.k = s.trans_b ? w->dim(1) : w->dim(0);
  s.n = s.trans_b ? w->dim(0) : w->dim(1);
  if (node.HasInput(2)) {
    const Tensor* c = g.FindConstant(node.inputs[2]);
    if (!c || c->dtype() != DType::kF32 || c->rank() < 1 || c->size() != s.n || c->shape().back() != s.n)
      return std::nullopt;
  }
  return s;
}

// Whether two products compute alike given the same operands: the same attributes (transB, the
// epilogue's activation, ...), none of them a tensor.
bool SameAttributes(const Node& a, const Node& b) {
  if (a.attrs.size() != b.attrs.size()) return false;
  for (auto i = a.attrs.begin(), j = b.attrs.begin(); i != a.attrs.end(); ++i, ++j) {
    if (i->first != j->first || i->second.index() != j->second.index()) return false;
    const bool equal = std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, Tensor>) {
            return false;
          } else {
            return x == std::get<T>(j->second);
          }
        },
        i->second);
    if (!equal) return false;
  }
  return true;
}

class SiblingMerger {
 public:
  SiblingMerger(Graph& g, int64_t min_weights) : g_(g), min_weights_(min_weights) {}

  int Run() {
    // Candidates by what they must share: the input, the op, how W is laid out, its inner size,
    // whether they add a row.
    std::map<std::tuple<int, std::string, bool, int64_t, bool>, std::vector<Sibling>> by_input;
    for (size_t n = 0; n < g_.nodes.size(); ++n) {
      std::optional<Sibling> s = AsSibling(g_, n);
      if (!s) continue;
      const Node& node = g_.nodes[n];
      by_input[{node.inputs[0], node.op, s->trans_b, s->k, node.HasInput(2)}].push_back(*s);
    }
    std::vector<std::vector<Sibling>> groups;
    for (auto& [key, candidates] : by_input) {
      std::vector<bool> taken(candidates.size(), false);
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (taken[i]) continue;
        std::vector<Sibling> group{candidates[i]};
        for (size_t j = i + 1; j < candidates.size(); ++j) {
          if (!taken[j] && SameAttributes(g_.nodes[candidates[i].node], g_.nodes[candidates[j].node])) {
            group.push_back(candidates[j]);
            taken[j] = true;
          }
        }
        int64_t weights = 0;
        for (const Sibling& s : group) weights += s.n * s.k;
        if (group.size() > 1 && weights >= min_weights_) groups.push_back(std::move(group));
      }
    }
    if (groups.empty()) return 0;
    // Each group's product takes the place of its first member, its slices right after it: every
    // reader of a member's output comes after that member, so after the first.
    std::map<size_t, std::vector<Node>> replacing;
    std::vector<bool> removed(g_.nodes.size(), false);
    for (const std::vector<Sibling>& group : groups) {
      replacing[group.front().node] = Merge(group);
      for (const Sibling& s : group) removed[s.node] = true;
    }
    std::vector<Node> nodes;
    for (size_t n = 0; n < g_.nodes.size(); ++n) {
      auto it = replacing.find(n);
      if (it != replacing.end()) {
        for (Node& node : it->second) nodes.push_back(std::move(node));
      } else if (!removed[n]) {
        nodes.push_back(std::move(g_.nodes[n]));
      }
    }
    g_.nodes = std::move(nodes);
    return static_cast<int>(groups.size());
  }

 private:
  // The merged product and a Slice per member, writing the member's output.
  std::vector<Node> Merge(const std::vector<Sibling>& group) {
    const Node& first = g_.nodes[group.front().node];
    const bool trans_b = group.front().trans_b, biased = first.HasInput(2);
    const int64_t k = group.front().k;
    int64_t total = 0;
    for (const Sibling& s : group) total += s.n;
    // W side by side: [k, total] (its columns) or, transposed, [total, k] (its rows).
    Tensor w = Tensor::Empty(DType::kF32, trans_b ? Shape{total, k} : Shape{k, total});
    Tensor c = biased ? Tensor::Empty(DType::kF32, {total}) : Tensor();
    float* pw = w.data<float>();
    int64_t at = 0;
    for (const Sibling& s : group) {
      const Node& node = g_.nodes[s.node];
      const float* from = g_.constants.at(node.inputs[1]).data<float>();
      if (trans_b) {
        std::copy(from, from + s.n * k, pw + at * k);
      } else {
        for (int64_t r = 0; r < k; ++r) std::copy(from + r * s.n, from + (r + 1) * s.n, pw + r * total + at);
      }
      if (biased) {
        const float* bias = g_.constants.at(node.inputs[2]).data<float>();
        std::copy(bias, bias + s.n, c.data<float>() + at);
      }
      at += s.n;
    }
    Node merged = first;
    merged.name = first.name + ".siblings";
    merged.inputs[1] = g_.AddConstant(merged.name + ".weight", std::move(w));
    if (biased) merged.inputs[2] = g_.AddConstant(merged.name + ".bias", std::move(c));
    const Value& out = g_.values[static_cast<size_t>(first.outputs[0])];
    merged.outputs[0] = g_.AddValue({merged.name + ".out", out.dtype, {}, false});
    std::vector<Node> nodes{merged};
    const int axes = AddInt64s(g_, merged.name + ".axes", {-1});
    at = 0;
    for (const Sibling& s : group) {
      const Node& node = g_.nodes[s.node];
      Node slice;
      slice.op = "Slice";
      slice.name = node.name + ".slice";
      slice.inputs = {merged.outputs[0], AddInt64s(g_, slice.name + ".starts", {at}),
                      AddInt64s(g_, slice.name + ".ends", {at + s.n}), axes};
      slice.outputs = node.outputs;
      nodes.push_back(std::move(slice));
      at += s.n;
    }
    return nodes;
  }

  Graph& g_;
  const int64_t min_weights_;
};

}  // namespace

int MergeSiblingProducts(Graph& graph, int64_t min_weights) { return SiblingMerger(graph, min_weights).Run(); }

}  // namespace rankd
