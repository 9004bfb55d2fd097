// Softmax attention, as PyTorch exports it, becomes one SoftmaxAttention node
// (model/ops/softmax_attention.h; docs/passes.md). Three forms end in the weighted sum of the
// values:
//
//   heads:   Reshape(Transpose(MatMul(P, Transpose(Reshape(V, [b, L, H, E]), [0,2,1,3])), [0,2,1,3]))
//            with S = MatMul(Transpose(Reshape(Q, [b, M, H, D]), [0,2,1,3]),
//                            Transpose(Reshape(K, [b, L, H, D]), [0,2,3,1]))
//   one head: MatMul(P, V) with S = MatMul(Q, Transpose(K, [0,2,1]))
//   pooling: ReduceSum(Mul(Unsqueeze(P, 2), V), axes=[1], keepdims=0)
//            with S = Squeeze(MatMul(K, Unsqueeze(q, 2)), 2)
//
// and P = Softmax(Where(mask, fill, S / c), last axis); the Where (either way round, its mask
// through a Cast to BOOL or not) and the scaling (Div or Mul by a scalar) are optional. The heads
// H must be a constant of the Reshape's target (a constant shape, or the Concat PyTorch builds),
// so the match holds at every shape. After hoisting, keys, values and mask gathered with the
// request index are read per user with the index. Matched on value shapes from a plan at probe
// shapes; every intermediate must be read only inside the pattern.
#include <optional>

#include "compile/passes.h"
#include "compile/pattern.h"
#include "model/ops/softmax_attention.h"

namespace rankd {
namespace {

using namespace softmax_attention;

// What the softmax reads: the product S, its scale, and the mask (-1 when none).
struct Scores {
  int product = -1;
  float scale = 1.0f;
  int mask = -1;
  bool keeps = false;
  float fill = -1e9f;
};

class SoftmaxAttentionMatcher : public GraphPattern {
 public:
  using GraphPattern::GraphPattern;

  std::optional<Fusion> Match(const Node& end) const;

 private:
  // P = Softmax(...) over the last axis of a rank-`rank` value, unwrapped down to the product.
  std::optional<Scores> Unsoftmax(int probs, size_t rank, std::vector<int>& absorbed) const;
  // X [b, L, H*D] behind Transpose(Reshape(X, [b, L, H, D]), perm), with H; {-1, 0} when not.
  std::pair<int, int64_t> Unhead(int v, const std::vector<int64_t>& perm, std::vector<int>& absorbed) const;
  // The constant H of a Reshape target [b, L, H, D], or 0.
  int64_t ConstantHeads(int target) const;
  // The three forms: each fills the node's query, keys, values and heads, and returns the softmax.
  std::optional<Scores> Heads(const Node& end, Node& node, std::vector<int>& absorbed) const;
  std::optional<Scores> OneHead(const Node& end, Node& node, std::vector<int>& absorbed) const;
  std::optional<Scores> Pooling(const Node& end, Node& node, std::vector<int>& absorbed) const;
};

std::optional<Scores> SoftmaxAttentionMatcher::Unsoftmax(int probs, size_t rank, std::vector<int>& absorbed) const {
  const Shape* ps = ShapeOf(probs);
  const Node* softmax = Take(probs, "Softmax", absorbed);
  if (!ps || ps->size() != rank || !softmax) return std::nullopt;
  int64_t axis = softmax->GetInt("axis", graph().opset < 13 ? 1 : -1);
  if ((axis < 0 ? axis + static_cast<int64_t>(rank) : axis) != static_cast<int64_t>(rank) - 1) return std::nullopt;
  Scores s;
  int x = softmax->inputs[0];
  if (const Node* where = Take(x, "Where", absorbed)) {
    double fill = 0;
    if (Scalar(where->inputs[1], fill)) {
      x = where->inputs[2];
    } else if (Scalar(where->inputs[2], fill)) {
      x = where->inputs[1];
      s.keeps = true;
    } else {
      return std::nullopt;
    }
    s.fill = static_cast<float>(fill);
    s.mask = where->inputs[0];
    std::vector<int> cast;
    if (const Node* c = Take(s.mask, "Cast", cast)) {
      const PlanValue* from = Planned(c->inputs[0]);
      if (from && from->dtype == DType::kBool) {
        s.mask = c->inputs[0];
        absorbed.insert(absorbed.end(), cast.begin(), cast.end());
      }
    }
    // [rows, 1, ..., 1, length] against the scores' [rows, ..., length] (of their rank: broadcasting
    // aligns the last axes).
    const PlanValue* m = Planned(s.mask);
    bool ok = m && m->dtype == DType::kBool && m->shape.size() == rank && m->shape.front() == ps->front() &&
              m->shape.back() == ps->back();
    for (size_t i = 1; ok && i + 1 < rank; ++i) ok = m->shape[i] == 1;
    if (!ok) return std::nullopt;
    // Unsqueezes that only add those middle axes are read through: the op takes [rows, length].
    for (std::vector<int> more; const Node* u = Take(s.mask, "Unsqueeze", more); more.clear()) {
      const PlanValue* in = Planned(u->inputs[0]);
      if (!in || in->shape.size() < 2 || in->shape.front() != ps->front() || in->shape.back() != ps->back()) break;
      s.mask = u->inputs[0];
      absorbed.insert(absorbed.end(), more.begin(), more.end());
    }
  }
  double c = 0;
  std::vector<int> taken;
  if (const Node* div = Take(x, "Div", taken); div && Scalar(div->inputs[1], c) && c != 0) {
    s.scale = static_cast<float>(1.0 / c);
    x = div->inputs[0];
    absorbed.insert(absorbed.end(), taken.begin(), taken.end());
  } else if (taken.clear(); const Node* mul = Take(x, "Mul", taken)) {
    const int side = Scalar(mul->inputs[1], c) ? 0 : Scalar(mul->inputs[0], c) ? 1 : -1;
    if (side >= 0) {
      s.scale = static_cast<float>(c);
      x = mul->inputs[static_cast<size_t>(side)];
      absorbed.insert(absorbed.end(), taken.begin(), taken.end());
    }
  }
  const Shape* xs = ShapeOf(x);
  if (!xs || *xs != *ps) return std::nullopt;
  s.product = x;
  return s;
}

int64_t SoftmaxAttentionMatcher::ConstantHeads(int target) const {
  if (const Tensor* t = graph().FindConstant(target)) return t->size() == 4 ? t->ScalarAsInt(2) : 0;
  const Node* concat = Producer(target);
  if (!concat || concat->op != "Concat" || concat->inputs.size() != 4) return 0;
  const Tensor* h = graph().FindConstant(concat->inputs[2]);
  return h && h->size() == 1 ? h->ScalarAsInt(0) : 0;
}

std::pair<int, int64_t> SoftmaxAttentionMatcher::Unhead(int v, const std::vector<int64_t>& perm,
                                                        std::vector<int>& absorbed) const {
  std::vector<int> taken;
  const Node* transpose = Take(v, "Transpose", taken);
  if (!transpose || transpose->GetInts("perm") != perm) return {-1, 0};
  const Node* reshape = Take(transpose->inputs[0], "Reshape", taken);
  if (!reshape || !reshape->HasInput(1)) return {-1, 0};
  const int x = reshape->inputs[0];
  const Shape *xs = ShapeOf(x), *rs = ShapeOf(reshape->outputs[0]);
  const int64_t heads = ConstantHeads(reshape->inputs[1]);
  if (!xs || !rs || xs->size() != 3 || rs->size() != 4 || (*rs)[0] != (*xs)[0] || (*rs)[1] != (*xs)[1] || heads < 1 ||
      (*rs)[2] != heads || heads * (*rs)[3] != (*xs)[2]) {
    return {-1, 0};
  }
  absorbed.insert(absorbed.end(), taken.begin(), taken.end());
  return {x, heads};
}

std::optional<Scores> SoftmaxAttentionMatcher::Heads(const Node& end, Node& node, std::vector<int>& absorbed) const {
  const Shape* out = ShapeOf(end.outputs[0]);
  if (end.op != "Reshape" || !out || out->size() != 3) return std::nullopt;
  const Node* back = Take(end.inputs[0], "Transpose", absorbed);
  if (!back || back->GetInts("perm") != std::vector<int64_t>{0, 2, 1, 3}) return std::nullopt;
  const Node* product = Take(back->inputs[0], "MatMul", absorbed);
  if (!product || product->inputs.size() != 2 || product->Has("activation")) return std::nullopt;
  const auto [values, value_heads] = Unhead(product->inputs[1], {0, 2, 1, 3}, absorbed);
  auto scores = Unsoftmax(product->inputs[0], 4, absorbed);
  if (values < 0 || !scores) return std::nullopt;
  const Node* qk = Take(scores->product, "MatMul", absorbed);
  if (!qk || qk->inputs.size() != 2 || qk->Has("activation")) return std::nullopt;
  const auto [query, query_heads] = Unhead(qk->inputs[0], {0, 2, 1, 3}, absorbed);
  const auto [keys, key_heads] = Unhead(qk->inputs[1], {0, 2, 3, 1}, absorbed);
  // The output [rows, positions, heads * E] of the query's rows and positions.
  const Shape *vs = ShapeOf(values), *qs = ShapeOf(query);
  if (query < 0 || keys < 0 || query_heads != value_heads || key_heads != value_heads || !vs || !qs ||
      (*out)[0] != (*qs)[0] || (*out)[1] != (*qs)[1] || (*out)[2] != (*vs)[2]) {
    return std::nullopt;
  }
  node.inputs = {query, keys, values};
  node.attrs["heads"] = value_heads;
  return scores;
}

std::optional<Scores> SoftmaxAttentionMatcher::OneHead(const Node& end, Node& node, std::vector<int>& absorbed) const {
  if (end.op != "MatMul" || end.inputs.size() != 2 || end.Has("activation")) return std::nullopt;
  const Shape* vs = ShapeOf(end.inputs[1]);
  auto scores = Unsoftmax(end.inputs[0], 3, absorbed);
  if (!vs || vs->size() != 3 || !scores) return std::nullopt;
  const Node* qk = Take(scores->product, "MatMul", absorbed);
  if (!qk || qk->inputs.size() != 2 || qk->Has("activation")) return std::nullopt;
  const Node* kt = Take(qk->inputs[1], "Transpose", absorbed);
  if (!kt || kt->GetInts("perm") != std::vector<int64_t>{0, 2, 1}) return std::nullopt;
  const Shape *qs = ShapeOf(qk->inputs[0]), *ks = ShapeOf(kt->inputs[0]);
  if (!qs || !ks || qs->size() != 3 || ks->size() != 3 || (*ks)[0] != (*vs)[0] || (*ks)[1] != (*vs)[1])
    return std::nullopt;
  node.inputs = {qk->inputs[0], kt->inputs[0], end.inputs[1]};
  return scores;
}

std::optional<Scores> SoftmaxAttentionMatcher::Pooling(const Node& end, Node& node, std::vector<int>& absorbed) const {
  if (end.op != "ReduceSum" || end.GetInt("keepdims", 1) != 0 || Axes(end, 3) != std::vector<int64_t>{1})
    return std::nullopt;
  const Node* mul = Take(end.inputs[0], "Mul", absorbed);
  if (!mul || mul->inputs.size() != 2) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const int weights = mul->inputs[static_cast<size_t>(side)], values = mul->inputs[static_cast<size_t>(1 - side)];
    std::vector<int> taken;
    const Node* unsqueeze = Take(weights, "Unsqueeze", taken);
    const Shape* vs = ShapeOf(values);
    if (!unsqueeze || Axes(*unsqueeze, 3) != std::vector<int64_t>{2} || !vs || vs->size() != 3) continue;
    auto scores = Unsoftmax(unsqueeze->inputs[0], 2, taken);
    if (!scores) return std::nullopt;
    const Node* squeeze = Take(scores->product, "Squeeze", taken);
    if (!squeeze || Axes(*squeeze, 3) != std::vector<int64_t>{2}) return std::nullopt;
    const Node* qk = Take(squeeze->inputs[0], "MatMul", taken);
    if (!qk || qk->inputs.size() != 2 || qk->Has("activation")) return std::nullopt;
    const Node* column = Take(qk->inputs[1], "Unsqueeze", taken);
    if (!column || Axes(*column, 3) != std::vector<int64_t>{2}) return std::nullopt;
    const Shape *qs = ShapeOf(column->inputs[0]), *ks = ShapeOf(qk->inputs[0]);
    if (!qs || !ks || qs->size() != 2 || ks->size() != 3 || (*ks)[0] != (*vs)[0] || (*ks)[1] != (*vs)[1])
      return std::nullopt;
    absorbed.insert(absorbed.end(), taken.begin(), taken.end());
    node.inputs = {column->inputs[0], qk->inputs[0], values};
    return scores;
  }
  return std::nullopt;
}

std::optional<Fusion> SoftmaxAttentionMatcher::Match(const Node& end) const {
  if (end.outputs.size() != 1) return std::nullopt;
  Fusion f;
  std::optional<Scores> s;
  for (auto form :
       {&SoftmaxAttentionMatcher::Heads, &SoftmaxAttentionMatcher::OneHead, &SoftmaxAttentionMatcher::Pooling}) {
    f.absorbed.clear();
    f.node = Node{};
    if ((s = (this->*form)(end, f.node, f.absorbed))) break;
  }
  if (!s) return std::nullopt;
  // Per-user keys, values and mask gathered with the request index are read with the index.
  auto [keys, keys_index] = Ungather(f.node.inputs[kKeys]);
  auto [values, values_index] = Ungather(f.node.inputs[kValues]);
  auto [mask, mask_index] = s->mask >= 0 ? Ungather(s->mask) : std::pair<int, int>{-1, keys_index};
  if (keys_index >= 0 && values_index == keys_index && mask_index == keys_index) {
    f.node.inputs = {f.node.inputs[kQuery], keys, values, mask, keys_index};
  } else {
    f.node.inputs.push_back(s->mask);
  }
  f.node.op = "SoftmaxAttention";
  f.node.name = end.name + ".softmax_attention";
  f.node.attrs["scale"] = s->scale;
  f.node.attrs["fill"] = s->fill;
  f.node.attrs["mask_keeps"] = int64_t{s->keeps ? 1 : 0};
  f.node.outputs = end.outputs;
  return f;
}

}  // namespace

int FuseSoftmaxAttention(Graph& graph, const std::vector<PlanValue>& shapes) {
  const int fused = FuseAll<SoftmaxAttentionMatcher>(graph, shapes);
  if (fused > 0) RemoveDeadNodes(graph);  // the gathers and shape arithmetic only the pattern read
  return fused;
}

}  // namespace rankd
