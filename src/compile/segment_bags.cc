// TensorFlow's sparse segment reductions as tf2onnx writes them, recognised as embedding bags.
//
// An `embedding_column` or `tf.nn.embedding_lookup_sparse` over ids a model makes sparse from a
// padded input (TensorFlow's `to_sparse_input`: the entries that are not -1) reaches ONNX as
//
//   mask    = Not(Equal(ids, -1))          (or Greater(ids, -1), GreaterOrEqual(ids, 0))
//   where   = Transpose(NonZero(mask))     [T, 2]: (row, slot) of each present id
//   values  = GatherND(ids, where)         [T]
//   rows    = Gather(table, values)        (or Gather(Gather(table, unique), inverse) of Unique(values))
//   segment = where's column 0             (Slice + Squeeze, or Gather(where, 0, axis 1); Casts allowed)
//
// and SparseSegmentSum/Mean/SqrtN(rows, segment) in tf2onnx's form (its SegmentSum handler): the
// segment ids sorted (TopK) and counted (Unique), an index grid [segments, longest] filled with -1
// and scattered into (ScatterND), the rows plus one zero row gathered through it and summed over
// its second axis (ReduceSum); the mean and sqrt-n divide that by the counts (ScatterElements of
// Unique's counts, cast, Sqrt for sqrt-n, Max(., 1) where the segments are counted, unsqueezed).
// Before 2021 the handler wrote the sum as Reshape(MatMul(OneHot(segment, segments, [0, 1], axis 0),
// Reshape(rows, [0, -1])), shape), the mean and sqrt-n dividing the product by the OneHot's row
// sums. The segments are either counted (num_segments: the rows of `ids`) or the largest segment
// id + 1.
//
// That is EmbeddingBag(table, ids) with the padded ids as they are (a negative id an empty slot)
// and the sum, mean or sqrtn combiner: the node writing the result (the sum, the division or the
// Reshape back) becomes that bag,
// and what fed it is left to RemoveDeadNodes. With the segments not counted, TensorFlow's result
// has max(segment) + 1 rows where the bag has one per row of `ids`: the same where every row has an
// id (as `embedding_lookup_sparse` requires), and zero rows past the last row that has one.
#include <optional>

#include "compile/passes.h"
#include "model/ops/bag_combiner.h"

namespace rankd {
namespace {

class SegmentMatcher {
 public:
  explicit SegmentMatcher(const Graph& g) : g_(g), producer_(g.Producers()) {}

  // The node writing `value` if it is `op` (any op when null), else nullptr.
  const Node* Producer(int value, const char* op = nullptr) const {
    if (value < 0 || static_cast<size_t>(value) >= producer_.size()) return nullptr;
    const int p = producer_[static_cast<size_t>(value)];
    if (p < 0) return nullptr;
    const Node& n = g_.nodes[static_cast<size_t>(p)];
    return !op || n.op == op ? &n : nullptr;
  }

  // Which output of its producer `value` is (-1 for none).
  int OutputIndex(int value) const {
    const Node* n = Producer(value);
    if (!n) return -1;
    for (size_t o = 0; o < n->outputs.size(); ++o) {
      if (n->outputs[o] == value) return static_cast<int>(o);
    }
    return -1;
  }

  // `value` past any Casts.
  int Uncast(int value) const {
    for (const Node* n = Producer(value, "Cast"); n; n = Producer(value, "Cast")) value = n->Input(0);
    return value;
  }

  // A node's integer list from its constant input `i`, or from attribute `attr` where it has no
  // such input (opsets before 13 give axes and the like as attributes).
  std::optional<std::vector<int64_t>> Ints(const Node& n, int i, const char* attr) const {
    if (n.HasInput(i)) {
      const Tensor* t = g_.FindConstant(n.Input(i));
      if (!t || (t->dtype() != DType::kI64 && t->dtype() != DType::kI32)) return std::nullopt;
      std::vector<int64_t> v;
      for (int64_t k = 0; k < t->size(); ++k) v.push_back(t->ScalarAsInt(k));
      return v;
    }
    if (!attr || !n.Has(attr)) return std::nullopt;
    return n.GetInts(attr);
  }

  bool IsScalar(int value, double want) const { return g_.ScalarConstant(value) == want; }
  const Graph& graph() const { return g_; }

  // The padded ids whose present entries (not -1) `mask` marks.
  int MaskedIds(int mask) const {
    if (const Node* no = Producer(mask, "Not")) {
      const Node* eq = Producer(no->Input(0), "Equal");
      if (eq && IsScalar(eq->Input(1), -1)) return Uncast(eq->Input(0));
      return -1;
    }
    if (const Node* gt = Producer(mask, "Greater"); gt && IsScalar(gt->Input(1), -1)) return Uncast(gt->Input(0));
    if (const Node* ge = Producer(mask, "GreaterOrEqual"); ge && IsScalar(ge->Input(1), 0)) return Uncast(ge->Input(0));
    return -1;
  }

  // The padded ids whose present entries' (row, slot) pairs `where` lists: Transpose(NonZero(mask)).
  int WhereOf(int where) const {
    const Node* t = Producer(Uncast(where), "Transpose");
    if (!t || t->GetInts("perm") != std::vector<int64_t>{1, 0}) return -1;
    const Node* nz = Producer(t->Input(0), "NonZero");
    return nz ? MaskedIds(nz->Input(0)) : -1;
  }

  // The `where` whose column 0 `segment` is (-1 for none).
  int ColumnZeroOf(int segment) const {
    segment = Uncast(segment);
    if (const Node* g = Producer(segment, "Gather"); g && g->GetInt("axis", 0) == 1 && IsScalar(g->Input(1), 0)) {
      return g->Input(0);
    }
    const Node* sq = Producer(segment, "Squeeze");
    if (!sq || Ints(*sq, 1, "axes") != std::vector<int64_t>{1}) return -1;
    const Node* slice = Producer(sq->Input(0), "Slice");
    if (!slice) return -1;
    const auto starts = Ints(*slice, 1, "starts"), ends = Ints(*slice, 2, "ends");
    std::optional<std::vector<int64_t>> axes = Ints(*slice, 3, "axes");
    if (!starts || !ends || starts->size() != ends->size()) return -1;
    if (!axes) {
      axes = std::vector<int64_t>();
      for (size_t k = 0; k < starts->size(); ++k) axes->push_back(static_cast<int64_t>(k));
    }
    bool column_zero = false;
    for (size_t k = 0; k < axes->size() && k < starts->size(); ++k) {
      if ((*axes)[k] == 1) column_zero = (*starts)[k] == 0 && (*ends)[k] == 1;
      if ((*axes)[k] == 0 && ((*starts)[k] != 0 || (*ends)[k] < (int64_t{1} << 31))) return -1;
    }
    return column_zero ? slice->Input(0) : -1;
  }

  // The table and the flat ids `rows` gathers: Gather(table, values), or Gather(Gather(table,
  // unique), inverse) with unique and inverse Unique(values)'s outputs 0 and 2.
  std::optional<std::pair<int, int>> GatheredRows(int rows) const {
    const Node* outer = Producer(rows, "Gather");
    if (!outer || outer->GetInt("axis", 0) != 0) return std::nullopt;
    if (const Tensor* t = g_.FindConstant(outer->Input(0)); t && t->rank() == 2) {
      return std::pair{outer->Input(0), outer->Input(1)};
    }
    const Node* inner = Producer(outer->Input(0), "Gather");
    const Node* unique = Producer(outer->Input(1), "Unique");
    if (!inner || !unique || inner->GetInt("axis", 0) != 0 || OutputIndex(outer->Input(1)) != 2 ||
        Producer(inner->Input(1)) != unique || OutputIndex(inner->Input(1)) != 0) {
      return std::nullopt;
    }
    const Tensor* t = g_.FindConstant(inner->Input(0));
    if (!t || t->rank() != 2) return std::nullopt;
    return std::pair{inner->Input(0), unique->Input(0)};
  }

  // Whether `segments` counts the rows of `ids`: Gather(Shape(ids), 0), or Squeeze/Reshape of
  // Slice(Shape(ids), [0], [1]), past Casts.
  bool CountsRowsOf(int segments, int ids) const {
    segments = Uncast(segments);
    for (const Node* n = Producer(segments); n && (n->op == "Squeeze" || n->op == "Reshape"); n = Producer(segments)) {
      segments = Uncast(n->Input(0));
    }
    const Node* shape = nullptr;
    if (const Node* g = Producer(segments, "Gather"); g && IsScalar(g->Input(1), 0)) {
      shape = Producer(g->Input(0), "Shape");
    } else if (const Node* s = Producer(segments, "Slice"); s && Ints(*s, 1, "starts") == std::vector<int64_t>{0} &&
                                                            Ints(*s, 2, "ends") == std::vector<int64_t>{1}) {
      shape = Producer(s->Input(0), "Shape");
    }
    return shape && Uncast(shape->Input(0)) == ids;
  }

  // Whether `segments` is the largest of `segment` + 1 (the segments not counted).
  bool LargestPlusOne(int segments, int segment) const {
    const Node* add = Producer(Uncast(segments), "Add");
    if (!add || !IsScalar(add->Input(1), 1)) return false;
    const Node* max = Producer(add->Input(0), "ReduceMax");
    return max && Uncast(max->Input(0)) == segment;
  }

 private:
  const Graph& g_;
  std::vector<int> producer_;
};

// What a tf2onnx segment sum reads: its rows, its segment ids and the count of segments; and how
// it combines them, with the node that writes its result (the sum, or the division by the counts).
struct SegmentSum {
  int rows = -1, segment = -1, segments = -1;
  BagCombiner combiner = kBagSum;
  size_t result = 0;  // index in graph.nodes
};

// The segment sum, mean or sqrt-n whose sum is node `i`, a ReduceSum over axis 1 of the grid's
// gather (tf2onnx's SegmentSum handler since 2021), or nullopt where it is not one.
std::optional<SegmentSum> MatchGridSum(const SegmentMatcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& sum = g.nodes[i];
  if (sum.op != "ReduceSum" || sum.GetInt("keepdims", 1) != 0 || m.Ints(sum, 1, "axes") != std::vector<int64_t>{1}) {
    return std::nullopt;
  }
  const Node* gather = m.Producer(sum.Input(0), "Gather");
  if (!gather || gather->GetInt("axis", 0) != 0) return std::nullopt;
  const Node* with_zero = m.Producer(gather->Input(0), "Concat");
  const Node* grid = m.Producer(gather->Input(1), "ScatterND");
  if (!with_zero || !grid || with_zero->NumInputs() != 2 || with_zero->GetInt("axis", 0) != 0) return std::nullopt;
  const Node* filled = m.Producer(grid->Input(0), "ConstantOfShape");
  const Node* topk = m.Producer(grid->Input(2), "TopK");
  if (!filled || !topk || m.OutputIndex(grid->Input(2)) != 1) return std::nullopt;
  const Node* shape = m.Producer(filled->Input(0), "Concat");
  const Node* count = shape ? m.Producer(shape->Input(0), "Unsqueeze") : nullptr;
  if (!count) return std::nullopt;
  SegmentSum s{with_zero->Input(0), m.Uncast(topk->Input(0)), count->Input(0), kBagSum, i};
  // A mean or sqrt-n divides the sum by the counts (ScatterElements of the counts, output 3, of the
  // Unique over the sorted ids): the division writes the result.
  for (size_t d = 0; d < g.nodes.size(); ++d) {
    const Node& div = g.nodes[d];
    if (div.op != "Div" || div.Input(0) != sum.outputs[0]) continue;
    int v = div.Input(1);
    if (const Node* u = m.Producer(v, "Unsqueeze")) v = u->Input(0);
    if (const Node* max = m.Producer(v, "Max"); max && m.IsScalar(max->Input(1), 1)) v = max->Input(0);
    BagCombiner combiner = kBagMean;
    if (const Node* root = m.Producer(v, "Sqrt")) {
      v = root->Input(0);
      combiner = kBagSqrtN;
    }
    const Node* scatter = m.Producer(m.Uncast(v), "ScatterElements");
    const Node* unique = scatter ? m.Producer(scatter->Input(2), "Unique") : nullptr;
    if (!unique || m.OutputIndex(scatter->Input(2)) != 3 || m.Producer(unique->Input(0)) != topk ||
        m.OutputIndex(unique->Input(0)) != 0) {
      continue;
    }
    s.combiner = combiner;
    s.result = d;
  }
  return s;
}

// The segment sum, mean or sqrt-n whose result node `i` writes in the earlier handler's form
// (tf2onnx before 2021): Reshape(MatMul(OneHot(segment ids, segments, [0, 1], axis 0),
// Reshape(rows, [0, -1])), shape), the product divided by the OneHot's row sums (or their Sqrt,
// Max(., 1) where the segments are counted, unsqueezed) for a mean or sqrt-n.
std::optional<SegmentSum> MatchOneHotSum(const SegmentMatcher& m, size_t i) {
  const Node& reshape = m.graph().nodes[i];
  if (reshape.op != "Reshape") return std::nullopt;
  int product = reshape.Input(0);
  const Node* div = m.Producer(product, "Div");
  if (div) product = div->Input(0);
  const Node* matmul = m.Producer(product, "MatMul");
  if (!matmul) return std::nullopt;
  const Node* onehot = m.Producer(m.Uncast(matmul->Input(0)), "OneHot");
  const Node* flat = m.Producer(matmul->Input(1), "Reshape");
  if (!onehot || onehot->GetInt("axis", -1) != 0 || !flat || m.Ints(*flat, 1, nullptr) != std::vector<int64_t>{0, -1}) {
    return std::nullopt;
  }
  SegmentSum s{flat->Input(0), m.Uncast(onehot->Input(0)), onehot->Input(1), kBagSum, i};
  if (!div) return s;
  int v = div->Input(1);
  if (const Node* u = m.Producer(v, "Unsqueeze")) v = u->Input(0);
  if (const Node* max = m.Producer(v, "Max"); max && m.IsScalar(max->Input(1), 1)) v = max->Input(0);
  s.combiner = kBagMean;
  if (const Node* root = m.Producer(v, "Sqrt")) {
    v = root->Input(0);
    s.combiner = kBagSqrtN;
  }
  const Node* counts = m.Producer(v, "ReduceSum");
  if (!counts || m.Producer(counts->Input(0)) != onehot || m.Ints(*counts, 1, "axes") != std::vector<int64_t>{1}) {
    return std::nullopt;  // divided by something else: not a form rankd knows
  }
  return s;
}

}  // namespace

StatusOr<int> FuseSegmentBags(Graph& graph) {
  SegmentMatcher m(graph);
  struct Rewrite {
    size_t node;  // the node that becomes the bag
    int table, ids;
    BagCombiner combiner;
  };
  std::vector<Rewrite> rewrites;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    std::optional<SegmentSum> s = MatchGridSum(m, i);
    if (!s) s = MatchOneHotSum(m, i);
    if (!s) continue;
    const Node& sum = graph.nodes[i];
    auto refuse = [&](const std::string& why) {
      return Unimplemented(sum.Describe() + " sums TensorFlow's sparse segments (tf2onnx's SegmentSum form), " + why +
                           ": rankd takes them over the entries of a padded ids input that are not -1 "
                           "(docs/passes.md)");
    };
    const std::optional<std::pair<int, int>> rows = m.GatheredRows(s->rows);
    if (!rows) return refuse("of rows that are not a Gather of a constant table");
    const Node* values = m.Producer(rows->second, "GatherND");
    const int where = m.ColumnZeroOf(s->segment);
    if (!values || where < 0 || m.Uncast(values->Input(1)) != m.Uncast(where)) {
      return refuse("whose ids and segment ids are not a sparse tensor's values and rows");
    }
    const int ids = m.WhereOf(where);
    if (ids < 0 || m.Uncast(values->Input(0)) != ids) return refuse("whose sparse tensor is not made from padded ids");
    if (!m.CountsRowsOf(s->segments, ids) && !m.LargestPlusOne(s->segments, s->segment)) {
      return refuse("with a count of segments that is neither the ids' rows nor the largest segment id + 1");
    }
    rewrites.push_back({s->result, rows->first, ids, s->combiner});
  }
  for (const Rewrite& r : rewrites) {
    Node& node = graph.nodes[r.node];
    node.op = "EmbeddingBag";
    node.inputs = {r.table, r.ids};
    node.outputs.resize(1);
    node.attrs.clear();
    node.attrs["mode"] = std::string(BagCombinerName(r.combiner));
  }
  if (!rewrites.empty()) RemoveDeadNodes(graph);  // the sorting, counting and scattering, ops no backend runs
  return static_cast<int>(rewrites.size());
}

}  // namespace rankd
