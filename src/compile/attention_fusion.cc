// DIN's attention unit, as the export and the earlier passes leave it, becomes one TargetAttention
// node (model/ops/target_attention.h; docs/passes.md):
//
//   ReduceSum(Mul(Unsqueeze(Mul(Squeeze(s), mask)), keys), axes=[1], keepdims=0)
//   s  = MatMul(... MatMul(Relu(key_term + cross_term + query_term), W1, b1, Relu) ..., Wk, bk)
//   cross_term = MatMul(Mul(query, keys), cross)
//
// with keys [rows, L, D], query [rows, 1, D], the key term [rows, L, H] and the query term
// [rows, 1, H] (the three Adds in any order; the mask multiply and its Squeeze/Unsqueeze
// optional). After user-side hoisting, keys, the key term and the mask are per-user values
// gathered with the request index: the fused node reads the per-user values and the index instead,
// so nothing per (candidate, position) is gathered or written. Matched on value shapes from a
// plan at probe shapes; every intermediate must be read only inside the pattern.
#include <algorithm>
#include <optional>

#include "compile/passes.h"
#include "compile/pattern.h"
#include "model/ops/target_attention.h"

namespace rankd {
namespace {

using target_attention::kMaxLayers;
using target_attention::kMaxWidth;

class AttentionMatcher : public GraphPattern {
 public:
  using GraphPattern::GraphPattern;

  std::optional<Fusion> Match(const Node& reduce) const;

 private:
  // Whether v is a constant FP32 weight [rows, cols] (-1: any).
  bool Weight(int v, int64_t rows, int64_t cols) const {
    const Tensor* t = graph().FindConstant(v);
    return t && t->dtype() == DType::kF32 && t->rank() == 2 && (rows < 0 || t->dim(0) == rows) &&
           (cols < 0 || t->dim(1) == cols);
  }
  bool Bias(int v, int64_t cols) const {
    const Tensor* t = graph().FindConstant(v);
    return v < 0 || (t && t->dtype() == DType::kF32 && t->shape() == Shape{cols});
  }
  // The score s [rows, L, 1] behind the pool's weight operand, and the mask [rows, L] (or -1).
  std::optional<std::pair<int, int>> Score(int weight, std::vector<int>& absorbed) const;
};

std::optional<std::pair<int, int>> AttentionMatcher::Score(int weight, std::vector<int>& absorbed) const {
  const Node* unsqueeze = Take(weight, "Unsqueeze", absorbed);
  if (!unsqueeze) return std::pair<int, int>{weight, -1};
  if (Axes(*unsqueeze, 3) != std::vector<int64_t>{2}) return std::nullopt;
  int weight2 = unsqueeze->inputs[0];
  std::vector<int> taken;
  if (const Node* squeeze = Take(weight2, "Squeeze", taken)) {
    if (Axes(*squeeze, 3) != std::vector<int64_t>{2}) return std::nullopt;
    absorbed.insert(absorbed.end(), taken.begin(), taken.end());
    return std::pair<int, int>{squeeze->inputs[0], -1};
  }
  const Node* masked = Take(weight2, "Mul", absorbed);
  if (!masked || masked->inputs.size() != 2) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    int score = masked->inputs[static_cast<size_t>(side)], mask = masked->inputs[static_cast<size_t>(1 - side)];
    std::vector<int> more;
    const Node* squeeze = Take(score, "Squeeze", more);
    if (!squeeze || Axes(*squeeze, 3) != std::vector<int64_t>{2}) continue;
    const Shape *ms = ShapeOf(mask), *ws = ShapeOf(weight2);
    if (!ms || !ws || *ms != *ws) return std::nullopt;
    absorbed.insert(absorbed.end(), more.begin(), more.end());
    return std::pair<int, int>{squeeze->inputs[0], mask};
  }
  return std::nullopt;
}

std::optional<Fusion> AttentionMatcher::Match(const Node& reduce) const {
  Fusion f;
  std::vector<int>& absorbed = f.absorbed;
  if (reduce.op != "ReduceSum" || reduce.outputs.size() != 1 || reduce.GetInt("keepdims", 1) != 0) return std::nullopt;
  const Shape* pooled = ShapeOf(reduce.inputs[0]);
  if (!pooled || pooled->size() != 3 || Axes(reduce, 3) != std::vector<int64_t>{1}) return std::nullopt;
  const Node* pool = Take(reduce.inputs[0], "Mul", absorbed);
  if (!pool || pool->inputs.size() != 2) return std::nullopt;
  // keys [rows, L, D] against the weight [rows, L, 1].
  int keys = -1, weight = -1;
  for (int side = 0; side < 2; ++side) {
    const Shape *k = ShapeOf(pool->inputs[static_cast<size_t>(side)]),
                *w = ShapeOf(pool->inputs[static_cast<size_t>(1 - side)]);
    if (k && w && *k == *pooled && (*k)[2] > 1 && *w == Shape{(*k)[0], (*k)[1], 1}) {
      keys = pool->inputs[static_cast<size_t>(side)];
      weight = pool->inputs[static_cast<size_t>(1 - side)];
    }
  }
  if (keys < 0) return std::nullopt;
  const int64_t rows = (*pooled)[0], length = (*pooled)[1], dim = (*pooled)[2];
  auto score = Score(weight, absorbed);
  if (!score) return std::nullopt;
  const auto [s, mask] = *score;

  // The attention MLP, from its last layer back to the first layer's Relu.
  std::vector<std::pair<int, int>> layers;  // (weight, bias or -1), first to last
  const Node* last = Take(s, "MatMul", absorbed);
  if (!last || last->Has("activation") || !Weight(last->inputs[1], -1, 1) ||
      !Bias(last->HasInput(2) ? last->inputs[2] : -1, 1)) {
    return std::nullopt;
  }
  layers.push_back({last->inputs[1], last->HasInput(2) ? last->inputs[2] : -1});
  int h = last->inputs[0];
  for (;;) {
    std::vector<int> taken;
    const Node* hidden = Take(h, "MatMul", taken);
    if (!hidden || hidden->GetString("activation", "") != "Relu") break;
    if (!Weight(hidden->inputs[1], -1, -1)) return std::nullopt;
    if (!Bias(hidden->HasInput(2) ? hidden->inputs[2] : -1, graph().FindConstant(hidden->inputs[1])->dim(1)))
      return std::nullopt;
    absorbed.insert(absorbed.end(), taken.begin(), taken.end());
    layers.insert(layers.begin(), {hidden->inputs[1], hidden->HasInput(2) ? hidden->inputs[2] : -1});
    h = hidden->inputs[0];
  }
  if (static_cast<int>(layers.size()) > kMaxLayers) return std::nullopt;
  const Node* relu = Take(h, "Relu", absorbed);
  if (!relu) return std::nullopt;
  // The first layer's three terms, summed by Adds (read only there) in any order.
  std::vector<int> terms, pending{relu->inputs[0]};
  while (!pending.empty() && terms.size() <= 3) {
    int v = pending.back();
    pending.pop_back();
    const Node* add = Take(v, "Add", absorbed);
    if (add && add->inputs.size() == 2) {
      pending.push_back(add->inputs[0]);
      pending.push_back(add->inputs[1]);
    } else {
      terms.push_back(v);
    }
  }
  if (terms.size() != 3 || !pending.empty()) return std::nullopt;
  int query = -1, cross = -1, cross_term = -1, key_term = -1, query_term = -1;
  int64_t width = -1;
  for (int t : terms) {  // the cross term first: it fixes the width
    std::vector<int> taken;
    const Node* product = Take(t, "MatMul", taken);
    if (!product || product->inputs.size() != 2 || product->Has("activation") || !Weight(product->inputs[1], dim, -1))
      continue;
    const Node* mul = Take(product->inputs[0], "Mul", taken);
    if (!mul || mul->inputs.size() != 2) continue;
    int q = mul->inputs[0] == keys ? mul->inputs[1] : mul->inputs[1] == keys ? mul->inputs[0] : -1;
    const Shape* qs = ShapeOf(q);
    if (!qs || *qs != Shape{rows, 1, dim}) continue;
    absorbed.insert(absorbed.end(), taken.begin(), taken.end());
    query = q;
    cross_term = t;
    cross = product->inputs[1];
    width = graph().FindConstant(cross)->dim(1);
    break;
  }
  if (cross < 0 || width > kMaxWidth || dim > kMaxWidth || layers.front().first < 0 ||
      graph().FindConstant(layers.front().first)->dim(0) != width) {
    return std::nullopt;
  }
  for (const auto& [w, b] : layers) {
    if (graph().FindConstant(w)->dim(1) > kMaxWidth) return std::nullopt;
  }
  for (int t : terms) {
    const Shape* ts = ShapeOf(t);
    if (!ts || t == cross_term) continue;
    if (*ts == Shape{rows, length, width} && key_term < 0)
      key_term = t;
    else if (*ts == Shape{rows, 1, width} && query_term < 0)
      query_term = t;
  }
  if (key_term < 0 || query_term < 0 || length == 1) return std::nullopt;

  // Per-user values gathered by the request index are read as they are, with the index.
  auto [keys_src, keys_index] = Ungather(keys);
  auto [key_term_src, key_term_index] = Ungather(key_term);
  auto [mask_src, mask_index] = mask >= 0 ? Ungather(mask) : std::pair<int, int>{-1, keys_index};
  if (key_term_index != keys_index || mask_index != keys_index) {
    keys_src = keys, key_term_src = key_term, mask_src = mask, keys_index = -1;  // mixed: read the candidate forms
  }
  f.node.op = "TargetAttention";
  f.node.name = reduce.name + ".attention";
  f.node.inputs = {keys_src, keys_index, query, key_term_src, query_term, cross, mask_src};
  for (const auto& [w, b] : layers) {
    f.node.inputs.push_back(w);
    f.node.inputs.push_back(b);
  }
  f.node.outputs = reduce.outputs;
  return f;
}

}  // namespace

int FuseTargetAttention(Graph& graph, const std::vector<PlanValue>& shapes) {
  const int fused = FuseAll<AttentionMatcher>(graph, shapes);
  if (fused > 0) RemoveDeadNodes(graph);  // the gathers only the pattern read
  return fused;
}

}  // namespace rankd
