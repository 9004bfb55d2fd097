// DLRM's dot interaction, as PyTorch exports it, becomes one DotInteraction node
// (model/ops/dot_interaction.h; docs/passes.md). The products Z = MatMul(T, Transpose(T,
// [0, 2, 1])) of a row's feature vectors (T FP32 [rows, F, D]) are gathered at constant
// positions in one of two forms:
//
//   flat:    Gather(Reshape or Flatten(Z) -> [rows, F*F], positions, axis=1)
//   indexed: Transpose(Gather(Flatten(Transpose(Z, [1, 2, 0]), axis=2), positions, axis=0), [1, 0])
//            (z[:, li, lj] through torch.onnx, positions li * F + lj; a Reshape that keeps the
//            shape may sit between the Gather and the Transpose)
//
// A position e is the pair (e / F, e % F), a negative one counting from F*F. The positions may
// be a constant of the graph or arithmetic on shapes that a plan folds (torch.onnx builds
// li * F + lj from Shape), read at the probe's shapes when nothing they are computed from is a
// count of rows (RowFree): then they hold at every request's shapes. Then Concat([dense,
// interaction], axis 1), the interaction read only there (through Reshapes that keep its shape),
// takes `dense` into the node. Every intermediate must be read only inside the pattern.
#include <algorithm>
#include <iterator>
#include <optional>

#include "compile/passes.h"
#include "compile/pattern.h"
#include "model/ops/dot_interaction.h"

namespace rankd {
namespace {

using namespace dot_interaction;

class DotInteractionMatcher : public GraphPattern {
 public:
  using GraphPattern::GraphPattern;

  std::optional<Fusion> Match(const Node& end) const {
    if (end.op == "Concat") return WithDense(end);
    std::vector<int> absorbed;
    int positions = -1, products = -1;
    if (end.op == "Gather" && end.NumInputs() == 2 && end.GetInt("axis", 0) == 1) {  // flat
      const int flat = end.Input(0);
      const Node* reshape = Take(flat, "Reshape", absorbed);
      if (!reshape) reshape = Take(flat, "Flatten", absorbed);
      if (!reshape || (reshape->op == "Flatten" && reshape->GetInt("axis", 1) != 1)) return std::nullopt;
      products = reshape->Input(0);
      const Shape *z = ShapeOf(products), *zf = ShapeOf(flat);
      if (!z || !zf || z->size() != 3 || *zf != Shape{(*z)[0], (*z)[1] * (*z)[2]}) return std::nullopt;
      positions = end.Input(1);
    } else if (end.op == "Transpose" && end.GetInts("perm") == std::vector<int64_t>{1, 0}) {  // indexed
      int picked = end.Input(0);
      if (const Node* keep = Take(picked, "Reshape", absorbed)) {
        if (!KeepsShape(*keep)) return std::nullopt;
        picked = keep->Input(0);
      }
      const Node* gather = Take(picked, "Gather", absorbed);
      if (!gather || gather->NumInputs() != 2 || gather->GetInt("axis", 0) != 0) return std::nullopt;
      const Node* flatten = Take(gather->Input(0), "Flatten", absorbed);
      if (!flatten || flatten->GetInt("axis", 1) != 2) return std::nullopt;
      const Node* turn = Take(flatten->Input(0), "Transpose", absorbed);
      if (!turn || turn->GetInts("perm") != std::vector<int64_t>{1, 2, 0}) return std::nullopt;
      products = turn->Input(0);
      positions = gather->Input(1);
    } else {
      return std::nullopt;
    }
    // Z = MatMul(T, Transpose(T, [0, 2, 1])), T [rows, F, D], Z [rows, F, F]; besides the
    // pattern only Shape nodes may read Z (torch.onnx reads F there for the positions).
    const Node* mm = Producer(products);
    if (!mm || mm->op != "MatMul" || mm->NumInputs() != 2 || Uses(products) != 1 + ShapeReaders(products))
      return std::nullopt;
    absorbed.push_back(static_cast<int>(mm - graph().nodes.data()));
    const int features = mm->Input(0);
    const Node* tt = Take(mm->Input(1), "Transpose", absorbed);
    if (!tt || tt->Input(0) != features || tt->GetInts("perm") != std::vector<int64_t>{0, 2, 1}) return std::nullopt;
    const Shape *t = ShapeOf(features), *z = ShapeOf(products), *out = ShapeOf(end.outputs[0]);
    if (!t || !z || !out || t->size() != 3 || *z != Shape{(*t)[0], (*t)[1], (*t)[1]}) return std::nullopt;
    std::optional<Tensor> pairs = Pairs(positions, (*t)[1]);
    if (!pairs || *out != Shape{(*t)[0], pairs->dim(0)}) return std::nullopt;
    Fusion f;
    f.absorbed = std::move(absorbed);
    f.node.op = "DotInteraction";
    f.node.name = end.name + ".dot_interaction";
    f.node.inputs = {features, -1};
    f.node.outputs = end.outputs;
    f.constants.push_back({kPairs, f.node.name + ".pairs", std::move(*pairs)});
    return f;
  }

 private:
  // The positions' value (a graph constant, or folded in the probe's plan) as [P, 2] pairs.
  std::optional<Tensor> Pairs(int positions, int64_t fields) const {
    const Tensor* p = graph().FindConstant(positions);
    if (!p && RowFree(positions, 0)) {
      const PlanValue* planned = Planned(positions);
      if (planned && planned->storage == PlanStorage::kConstant) p = planned->constant;
    }
    if (!p || p->rank() != 1 || (p->dtype() != DType::kI64 && p->dtype() != DType::kI32)) return std::nullopt;
    const int64_t square = fields * fields;
    Tensor pairs = Tensor::Zeros(DType::kI64, {p->size(), 2});
    for (int64_t i = 0; i < p->size(); ++i) {
      int64_t e = p->ScalarAsInt(i);
      if (e < -square || e >= square) return std::nullopt;
      if (e < 0) e += square;
      pairs.data<int64_t>()[2 * i] = e / fields;
      pairs.data<int64_t>()[2 * i + 1] = e % fields;
    }
    return pairs;
  }

  // Whether v is computed from constants and dimensions other than the first (the rows) of
  // Shape(x), through shape arithmetic: then its value at the probe's shapes holds at every
  // request's. torch.onnx's positions are Add(lj, Mul(li, Gather(Shape(Z), 2))).
  bool RowFree(int v, int depth) const {
    if (graph().IsConstant(v)) return true;
    const Node* n = Producer(v);
    if (!n || depth > 8) return false;
    if (n->op == "Gather" && n->NumInputs() == 2) {
      const Node* shape = Producer(n->Input(0));
      const Tensor* index = graph().FindConstant(n->Input(1));
      if (!shape || shape->op != "Shape" || shape->Has("start") || shape->Has("end") || !index) return false;
      const PlanValue* x = Planned(shape->Input(0));
      if (!x) return false;
      const int64_t rank = static_cast<int64_t>(x->shape.size());
      for (int64_t i = 0; i < index->size(); ++i) {
        const int64_t dim = index->ScalarAsInt(i);
        if (dim == 0 || dim == -rank) return false;  // the rows
      }
      return true;
    }
    static const char* const kArithmetic[] = {"Add",       "Sub",     "Mul",     "Div",    "Cast",
                                              "Unsqueeze", "Squeeze", "Reshape", "Concat", "Identity"};
    if (std::none_of(std::begin(kArithmetic), std::end(kArithmetic), [&](const char* op) { return n->op == op; })) {
      return false;
    }
    for (int in : n->inputs) {
      if (in >= 0 && !RowFree(in, depth + 1)) return false;
    }
    return true;
  }

  int ShapeReaders(int v) const {
    return static_cast<int>(std::count_if(graph().nodes.begin(), graph().nodes.end(),
                                          [&](const Node& n) { return n.op == "Shape" && n.Input(0) == v; }));
  }

  // A Reshape whose output has its input's shape at the probe's shapes, and whose target, where
  // constant, leaves every dimension that could be the rows' (the first two) to be inferred.
  bool KeepsShape(const Node& reshape) const {
    const Shape *in = ShapeOf(reshape.Input(0)), *out = ShapeOf(reshape.outputs[0]);
    if (!in || !out || *in != *out) return false;
    if (const Tensor* target = graph().FindConstant(reshape.Input(1))) {
      for (int64_t i = 0; i < target->size() && i < 2; ++i) {
        if (target->ScalarAsInt(i) > 0) return false;
      }
    }
    return true;
  }

  // Concat([dense, DotInteraction without dense], axis 1) -> DotInteraction with dense.
  std::optional<Fusion> WithDense(const Node& concat) const {
    if (concat.NumInputs() != 2) return std::nullopt;
    const int64_t axis = concat.GetInt("axis", 0);
    const Shape *dense = ShapeOf(concat.Input(0)), *out = ShapeOf(concat.outputs[0]);
    if (!dense || !out || dense->size() != 2 || out->size() != 2 || (axis != 1 && axis != -1)) return std::nullopt;
    std::vector<int> absorbed;
    int v = concat.Input(1);
    const Node* dot = nullptr;
    while (!dot) {
      if (const Node* keep = Take(v, "Reshape", absorbed)) {
        if (!KeepsShape(*keep)) return std::nullopt;
        v = keep->Input(0);
      } else if (dot = Take(v, "DotInteraction", absorbed); !dot) {
        return std::nullopt;
      }
    }
    if (dot->HasInput(kDense)) return std::nullopt;
    Fusion f;
    f.absorbed = std::move(absorbed);
    f.node = *dot;
    f.node.name = concat.name + ".dot_interaction";
    f.node.inputs.resize(kInputs, -1);
    f.node.inputs[kDense] = concat.Input(0);
    f.node.outputs = concat.outputs;
    return f;
  }
};

// Whether every node reads only graph inputs, constants and earlier nodes' outputs.
bool EveryInputDefined(const Graph& graph) {
  std::vector<bool> defined(graph.values.size(), false);
  for (int v : graph.inputs) defined[static_cast<size_t>(v)] = true;
  for (const auto& [v, t] : graph.constants) defined[static_cast<size_t>(v)] = true;
  for (const Node& n : graph.nodes) {
    for (int v : n.inputs) {
      if (v >= 0 && !defined[static_cast<size_t>(v)]) return false;
    }
    for (int v : n.outputs) defined[static_cast<size_t>(v)] = true;
  }
  return true;
}

}  // namespace

int FuseDotInteractions(Graph& graph, const std::vector<PlanValue>& shapes) {
  auto count = [&] {
    return std::count_if(graph.nodes.begin(), graph.nodes.end(),
                         [](const Node& n) { return n.op == "DotInteraction"; });
  };
  // Most models have no Gram product: no copy of the graph for them.
  if (std::none_of(graph.nodes.begin(), graph.nodes.end(), [](const Node& n) { return n.op == "MatMul"; })) {
    return 0;
  }
  const auto before = count();
  Graph written = graph;  // shares the constants
  if (FuseAll<DotInteractionMatcher>(graph, shapes) == 0) return 0;
  RemoveDeadNodes(graph);  // the shape arithmetic only the pattern read
  // A Shape of the products that something outside the pattern still reads would now read
  // nothing: keep the graph as written then.
  if (!EveryInputDefined(graph)) {
    graph = std::move(written);
    return 0;
  }
  return static_cast<int>(count() - before);
}

}  // namespace rankd
