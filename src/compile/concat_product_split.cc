// Splitting a product of a concatenation into products of its distinct parts (DIN's first
// attention layer) and reading broadcasts instead of their expansions (docs/passes.md).
#include <algorithm>
#include <map>
#include <optional>

#include "compile/passes.h"

namespace rankd {
namespace {

class Splitter {
 public:
  Splitter(Graph& g, const std::vector<PlanValue>& shapes)
      : g_(g), shapes_(shapes), producer_(g.Producers()), uses_(g.UseCounts()) {}

  // The replacement of node `m` (a MatMul), or nothing when it does not match or would not pay.
  std::optional<std::vector<Node>> Split(const Node& m);
  // Readers of m's output this replacement absorbed (the bias Add), to be dropped.
  std::vector<const Node*> absorbed;

 private:
  const Node* Producer(int v) const {
    int p = v < 0 ? -1 : producer_[static_cast<size_t>(v)];
    return p < 0 ? nullptr : &g_.nodes[static_cast<size_t>(p)];
  }
  const Shape* ShapeOf(int v) const {
    if (v < 0 || static_cast<size_t>(v) >= shapes_.size() || shapes_[static_cast<size_t>(v)].dtype == DType::kInvalid) {
      return nullptr;
    }
    return &shapes_[static_cast<size_t>(v)].shape;
  }
  // The single reader of v, when it is a node input read once and not a graph output.
  const Node* OnlyReader(int v) const;
  int NewValue(const std::string& name) { return g_.AddValue({name, DType::kF32, {}, false}); }

  Graph& g_;
  const std::vector<PlanValue>& shapes_;
  std::vector<int> producer_;
  std::vector<int> uses_;
};

const Node* Splitter::OnlyReader(int v) const {
  if (uses_[static_cast<size_t>(v)] != 1) return nullptr;
  for (const Node& n : g_.nodes) {
    for (int in : n.inputs) {
      if (in == v) return &n;
    }
  }
  return nullptr;  // the use is a graph output
}

std::optional<std::vector<Node>> Splitter::Split(const Node& m) {
  absorbed.clear();
  if (m.op != "MatMul" || m.inputs.size() != 2 || !g_.IsConstant(m.inputs[1])) return std::nullopt;
  const Tensor& w = g_.constants.at(m.inputs[1]);
  const Node* concat = Producer(m.inputs[0]);
  const Shape* shape = ShapeOf(m.inputs[0]);
  if (w.rank() != 2 || w.dtype() != DType::kF32 || !concat || concat->op != "Concat" || !shape || shape->size() < 2 ||
      uses_[static_cast<size_t>(m.inputs[0])] != 1) {
    return std::nullopt;
  }
  const int64_t rank = static_cast<int64_t>(shape->size());
  int64_t axis = concat->GetInt("axis", 0);
  if (axis < 0) axis += rank;
  if (axis != rank - 1) return std::nullopt;
  // Each part's rows of W.
  const std::vector<int>& parts = concat->inputs;
  std::vector<int64_t> first_row;
  int64_t rows = 0;
  for (int p : parts) {
    const Shape* s = ShapeOf(p);
    if (p < 0 || !s || static_cast<int64_t>(s->size()) != rank ||
        shapes_[static_cast<size_t>(p)].dtype != DType::kF32) {
      return std::nullopt;
    }
    first_row.push_back(rows);
    rows += s->back();
  }
  if (rows != w.dim(0)) return std::nullopt;
  auto is_part = [&](int v) { return std::find(parts.begin(), parts.end(), v) != parts.end(); };
  // A part that is the sum or difference of two other parts (same shape) adds its rows of W to
  // theirs; what remains are the atoms, each with the sum of its (signed) rows.
  std::vector<bool> decomposed(parts.size(), false);
  std::vector<float> second_sign(parts.size(), 1.0f);  // y's sign in x ± y
  for (size_t i = 0; i < parts.size(); ++i) {
    const Node* n = Producer(parts[i]);
    if (!n || (n->op != "Sub" && n->op != "Add") || n->inputs.size() != 2) continue;
    int x = n->inputs[0], y = n->inputs[1];
    if (x == parts[i] || y == parts[i] || !is_part(x) || !is_part(y)) continue;
    if (*ShapeOf(x) != *ShapeOf(parts[i]) || *ShapeOf(y) != *ShapeOf(parts[i])) continue;
    second_sign[i] = n->op == "Sub" ? -1.0f : 1.0f;
    decomposed[i] = true;
  }
  for (size_t i = 0; i < parts.size(); ++i) {  // an atom is never itself decomposed
    if (!decomposed[i]) continue;
    const Node* n = Producer(parts[i]);
    for (size_t j = 0; j < parts.size(); ++j) {
      if (decomposed[j] && (parts[j] == n->inputs[0] || parts[j] == n->inputs[1])) decomposed[i] = false;
    }
  }
  const int64_t h = w.dim(1);
  std::vector<int> atoms;
  std::map<int, Tensor> weights;  // atom -> [width, h]
  auto add_rows = [&](int atom, size_t part, float sign) {
    int64_t width = ShapeOf(atom)->back();
    auto [it, added] = weights.try_emplace(atom, Tensor::Zeros(DType::kF32, {width, h}));
    if (added) atoms.push_back(atom);
    const float* src = w.data<float>() + first_row[part] * h;
    float* dst = it->second.data<float>();
    for (int64_t e = 0; e < width * h; ++e) dst[e] += sign * src[e];
  };
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!decomposed[i]) {
      add_rows(parts[i], i, 1.0f);
      continue;
    }
    const Node* n = Producer(parts[i]);
    add_rows(n->inputs[0], i, 1.0f);
    add_rows(n->inputs[1], i, second_sign[i]);
  }
  // An atom that only expands a smaller value over the leading dims is multiplied unexpanded; the
  // sum broadcasts it back (as long as one atom has the full shape).
  std::vector<int> operand(atoms.size());
  std::vector<bool> narrow(atoms.size(), false);
  int full = 0;
  for (size_t a = 0; a < atoms.size(); ++a) {
    operand[a] = atoms[a];
    const Node* n = Producer(atoms[a]);
    const Shape* x = n && n->op == "Expand" ? ShapeOf(n->inputs[0]) : nullptr;
    if (x && static_cast<int64_t>(x->size()) == rank && x->back() == ShapeOf(atoms[a])->back() &&
        *x != *ShapeOf(atoms[a])) {
      operand[a] = n->inputs[0];
      narrow[a] = true;
    } else {
      ++full;
    }
  }
  if (full == 0) {  // keep one expanded, so the sum has the full shape
    operand[0] = atoms[0];
    narrow[0] = false;
  }
  bool any_narrow = std::find(narrow.begin(), narrow.end(), true) != narrow.end();
  if (atoms.size() >= parts.size() && !any_narrow) return std::nullopt;  // nothing saved
  // A bias added to the product goes onto a narrow product instead (fewer elements to add to).
  int out = m.outputs[0];
  int bias = -1;
  const Node* reader = OnlyReader(out);
  if (any_narrow && reader && reader->op == "Add" && reader->inputs.size() == 2) {
    int other = reader->inputs[0] == out ? reader->inputs[1] : reader->inputs[0];
    const Shape* bs = ShapeOf(other);
    bool row =
        bs && g_.IsConstant(other) && static_cast<int64_t>(bs->size()) <= rank && !bs->empty() && bs->back() == h;
    for (size_t d = 0; row && d + 1 < bs->size(); ++d) row = (*bs)[d] == 1;
    if (row && shapes_[static_cast<size_t>(other)].dtype == DType::kF32) {
      bias = other;
      out = reader->outputs[0];
      absorbed.push_back(reader);
    }
  }
  // Products, full ones first, then the narrow ones added to the running sum.
  std::vector<Node> nodes;
  std::vector<int> products;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t a = 0; a < atoms.size(); ++a) {
      if (narrow[a] != (pass == 1)) continue;
      const std::string name = m.name + ".split" + std::to_string(a);
      Node mm{"MatMul", name, {operand[a], g_.AddConstant(name + ".weight", std::move(weights.at(atoms[a])))}, {}, {}};
      mm.outputs = {NewValue(name + "_output")};
      products.push_back(mm.outputs[0]);
      nodes.push_back(std::move(mm));
      if (narrow[a] && bias >= 0) {
        nodes.push_back({"Add", name + ".bias", {products.back(), bias}, {NewValue(name + ".bias_output")}, {}});
        products.back() = nodes.back().outputs[0];
        bias = -1;
      }
    }
  }
  int sum = products[0];
  for (size_t i = 1; i < products.size(); ++i) {
    int result = i + 1 == products.size() ? out : NewValue(m.name + ".sum" + std::to_string(i));
    nodes.push_back({"Add", m.name + ".sum" + std::to_string(i), {sum, products[i]}, {result}, {}});
    sum = result;
  }
  if (products.size() == 1) nodes.back().outputs[0] = out;  // (one atom: its product is the output)
  return nodes;
}

bool IsBroadcastingBinary(const std::string& op) { return op == "Add" || op == "Sub" || op == "Mul" || op == "Div"; }

}  // namespace

int SplitConcatProducts(Graph& graph, const std::vector<PlanValue>& shapes) {
  Splitter splitter(graph, shapes);
  std::vector<Node> nodes;
  int split = 0;
  const size_t count = graph.nodes.size();
  std::vector<std::vector<Node>> replacements(count);
  std::vector<bool> replaced(count, false), removed(count, false);
  for (size_t n = 0; n < count; ++n) {
    if (removed[n]) continue;
    std::optional<std::vector<Node>> r = splitter.Split(graph.nodes[n]);
    if (!r) continue;
    replacements[n] = std::move(*r);
    replaced[n] = true;
    for (const Node* a : splitter.absorbed) removed[static_cast<size_t>(a - graph.nodes.data())] = true;
    ++split;
  }
  if (split == 0) return 0;
  for (size_t n = 0; n < count; ++n) {
    if (removed[n]) continue;
    if (!replaced[n]) {
      nodes.push_back(std::move(graph.nodes[n]));
      continue;
    }
    for (Node& r : replacements[n]) nodes.push_back(std::move(r));
  }
  graph.nodes = std::move(nodes);
  RemoveDeadNodes(graph);
  return split;
}

int ReadBroadcastsUnexpanded(Graph& graph) {
  std::vector<int> producer = graph.Producers();
  auto made_by = [&](int v, const char* op) -> const Node* {
    int p = v < 0 ? -1 : producer[static_cast<size_t>(v)];
    return p >= 0 && graph.nodes[static_cast<size_t>(p)].op == op ? &graph.nodes[static_cast<size_t>(p)] : nullptr;
  };
  int changed = 0;
  for (Node& n : graph.nodes) {
    if (!IsBroadcastingBinary(n.op) || n.inputs.size() != 2) continue;
    for (int side = 0; side < 2; ++side) {
      // Expand(x, Shape(other)) op other: broadcasting x against other gives the same shape and
      // elements, for every shape of x and other.
      const Node* expand = made_by(n.inputs[static_cast<size_t>(side)], "Expand");
      const Node* shape = expand && expand->inputs.size() == 2 ? made_by(expand->inputs[1], "Shape") : nullptr;
      int other = n.inputs[static_cast<size_t>(1 - side)];
      if (!shape || shape->inputs[0] != other || shape->Has("start") || shape->Has("end")) continue;
      n.inputs[static_cast<size_t>(side)] = expand->inputs[0];
      ++changed;
    }
  }
  if (changed) RemoveDeadNodes(graph);
  return changed;
}

}  // namespace rankd
