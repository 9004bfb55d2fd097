// TensorFlow's sparse segment reductions as tf2onnx writes them, recognised as embedding bags.
//
// An `embedding_column` or `tf.nn.embedding_lookup_sparse` reads a sparse tensor (indices,
// values) a model makes from a padded ids input (compile/sparse_tensors.h):
//
//   rows    = Gather(table, values)        (or Gather(Gather(table, unique), inverse) of Unique(values))
//   segment = indices' column 0            (Slice + Squeeze, or Gather(indices, 0, axis 1); Casts allowed)
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
//
// `embedding_lookup_sparse` with weights (`sp_weights`: a weighted categorical column's weights, or
// any sparse tensor of weights over the ids' indices) multiplies each gathered row by its weight
// and sums those with SegmentSum (the same handler over rows that are not gathered by it):
//
//   rows   = Mul(Gather(table, values), Reshape(w, Concat(Shape(w), [1])))   (or Unsqueeze(w, [1]))
//   w      = GatherND(weights, indices)    the ids' own indices, or the weights' to_sparse_input
//                                          (Transpose(NonZero(Not(Equal(weights, 0)))))
//   sum    = SegmentSum(rows, segment)
//   mean   = DivNoNan(sum, SegmentSum(w as a column, segment))
//   sqrtn  = DivNoNan(sum, Sqrt(SegmentSum(Pow(w as a column, 2), segment)))
//
// DivNoNan as tf2onnx writes it, Where(Equal(d, 0), 0, Div(sum, d)), or a plain Div (TensorFlow
// before 2.0). That is the weighted bag EmbeddingBag(table, Reshape(ids, [-1]), b * slots for b in
// [0, rows], Reshape(weights, [-1])): each slot's weight beside its id, a -1 id an empty slot (its
// weight unread), a divisor of 0 giving zeros (as DivNoNan does; a plain Div gives NaN there).
// Through safe_embedding_lookup_sparse (below) the weights are retained and filled beside the ids
// (compile/sparse_tensors.h); where it drops the weights <= 0 with their ids (a mean or sqrt-n in
// TensorFlow 2, every combiner in TensorFlow 1) the bag reads Where(weights > 0, weights, 0),
// which adds to no sum, weight sum or sum of squares, as a dropped id does.
//
// `safe_embedding_lookup_sparse` (an `embedding_column`'s default lookup) gives every empty row a
// default id first (SparseFillEmptyRows) and zeroes those rows of the result again (Where, or
// tf2onnx's Add/Mul form of Select), then reshapes it to the shape it has: that zeroing, or the
// Reshape after it, becomes the bag (whose empty bags are zeros). With a default_id the rows are
// not zeroed again; that form is refused.
#include <optional>

#include "compile/passes.h"
#include "compile/sparse_tensors.h"
#include "model/ops/bag_combiner.h"

namespace rankd {
namespace {

// The table and the flat ids `rows` gathers: Gather(table, values), or Gather(Gather(table,
// unique), inverse) with unique and inverse Unique(values)'s outputs 0 and 2.
std::optional<std::pair<int, int>> GatheredRows(const SparseTensorMatcher& m, int rows) {
  const Node* outer = m.Producer(rows, "Gather");
  if (!outer || outer->GetInt("axis", 0) != 0) return std::nullopt;
  if (const Tensor* t = m.graph().FindConstant(outer->Input(0)); t && t->rank() == 2) {
    return std::pair{outer->Input(0), outer->Input(1)};
  }
  const Node* inner = m.Producer(outer->Input(0), "Gather");
  const Node* unique = m.Producer(outer->Input(1), "Unique");
  if (!inner || !unique || inner->GetInt("axis", 0) != 0 || m.OutputIndex(outer->Input(1)) != 2 ||
      m.Producer(inner->Input(1)) != unique || m.OutputIndex(inner->Input(1)) != 0) {
    return std::nullopt;
  }
  const Tensor* t = m.graph().FindConstant(inner->Input(0));
  if (!t || t->rank() != 2) return std::nullopt;
  return std::pair{inner->Input(0), unique->Input(0)};
}

// Whether `segments` is the largest of `segment` + 1 (the segments not counted).
bool LargestPlusOne(const SparseTensorMatcher& m, int segments, int segment) {
  const Node* add = m.Producer(m.Uncast(segments), "Add");
  if (!add || !m.IsScalar(add->Input(1), 1)) return false;
  const Node* max = m.Producer(add->Input(0), "ReduceMax");
  return max && m.Uncast(max->Input(0)) == segment;
}

// Whether `mask` is `empty_rows` broadcast over a result's columns: Tile(Reshape(empty_rows, [-1,
// 1]), ...) or the Reshape alone, past Casts.
bool IsEmptyRowMask(const SparseTensorMatcher& m, int mask, int empty_rows) {
  mask = m.Uncast(mask);
  if (const Node* tile = m.Producer(mask, "Tile")) mask = m.Uncast(tile->Input(0));
  const Node* column = m.Producer(mask, "Reshape");
  if (!column) column = m.Producer(mask, "Unsqueeze");
  return column && m.Uncast(column->Input(0)) == empty_rows;
}

// The node (index) that zeroes the rows of `result` that `empty_rows` marks, as
// safe_embedding_lookup_sparse does where no default id is given: Where(mask, zeros, result), or
// tf2onnx's Select for floats, Add(Mul(Cast(mask), zeros), Mul(result, Cast(Not(mask)))).
std::optional<size_t> EmptyRowsZeroed(const SparseTensorMatcher& m, int result, int empty_rows) {
  const Graph& g = m.graph();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.outputs.empty()) continue;
    if (n.op == "Where" && n.Input(2) == result && IsEmptyRowMask(m, n.Input(0), empty_rows) && m.IsZeros(n.Input(1))) {
      return i;
    }
    if (n.op != "Add" || n.NumInputs() != 2) continue;
    const Node* a = m.Producer(n.Input(0), "Mul");
    const Node* b = m.Producer(n.Input(1), "Mul");
    if (!a || !b) continue;
    for (int k = 0; k < 2; ++k) {
      const Node* kept = k == 0 ? a : b;
      const Node* dropped = k == 0 ? b : a;
      const int kept_by = kept->Input(0) == result ? kept->Input(1) : kept->Input(1) == result ? kept->Input(0) : -1;
      const Node* keep = kept_by >= 0 ? m.Producer(m.Uncast(kept_by), "Not") : nullptr;
      if (!keep || !IsEmptyRowMask(m, keep->Input(0), empty_rows)) continue;
      if (m.IsZeros(dropped->Input(0)) || m.IsZeros(dropped->Input(1))) return i;
    }
  }
  return std::nullopt;
}

// The Reshape (node index) that safe_embedding_lookup_sparse ends with, when it gives `result` the
// shape it has: [rows of `ids`, Slice(Shape(result), [1], [...])].
std::optional<size_t> FinalReshape(const SparseTensorMatcher& m, int result, int ids) {
  const Graph& g = m.graph();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op != "Reshape" || n.outputs.empty() || n.Input(0) != result) continue;
    const Node* shape = m.Producer(m.Uncast(n.Input(1)), "Concat");
    if (!shape || shape->NumInputs() != 2 || shape->GetInt("axis", 0) != 0 || !m.CountsRowsOf(shape->Input(0), ids)) {
      continue;
    }
    const Node* columns = m.Producer(m.Uncast(shape->Input(1)), "Slice");
    const Node* of = columns ? m.Producer(m.Uncast(columns->Input(0)), "Shape") : nullptr;
    const auto ends = columns ? m.Ints(*columns, 2, "ends") : std::nullopt;
    if (of && of->Input(0) == result && m.Ints(*columns, 1, "starts") == std::vector<int64_t>{1} && ends &&
        ends->size() == 1 && (ends->front() == -1 || ends->front() >= 2)) {
      return i;
    }
  }
  return std::nullopt;
}

// What a tf2onnx segment sum reads: its rows, its segment ids and the count of segments; and how
// it combines them, with the node that writes its result (the sum, or the division by the counts).
struct SegmentSum {
  int rows = -1, segment = -1, segments = -1;
  BagCombiner combiner = kBagSum;
  size_t result = 0;  // index in graph.nodes
};

// The segment sum, mean or sqrt-n whose sum is node `i`, a ReduceSum over axis 1 of the grid's
// gather (tf2onnx's SegmentSum handler since 2021), or nullopt where it is not one.
std::optional<SegmentSum> MatchGridSum(const SparseTensorMatcher& m, size_t i) {
  const Graph& g = m.graph();
  const Node& sum = g.nodes[i];
  if (sum.op != "ReduceSum" || sum.outputs.empty() || sum.GetInt("keepdims", 1) != 0 ||
      m.Ints(sum, 1, "axes") != std::vector<int64_t>{1}) {
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
    if (div.op != "Div" || div.outputs.empty() || div.Input(0) != sum.outputs[0]) continue;
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
std::optional<SegmentSum> MatchOneHotSum(const SparseTensorMatcher& m, size_t i) {
  const Node& reshape = m.graph().nodes[i];
  if (reshape.op != "Reshape" || reshape.outputs.empty()) return std::nullopt;
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

// A segment sum of either handler's form whose node is `i`.
std::optional<SegmentSum> MatchSegmentSum(const SparseTensorMatcher& m, size_t i) {
  std::optional<SegmentSum> s = MatchGridSum(m, i);
  return s ? s : MatchOneHotSum(m, i);
}

// The weights `column` holds as a column [T, 1] for the rows to broadcast against: Reshape(w,
// Concat(Shape(w), [1])) or Reshape(w, [-1, 1]), or Unsqueeze(w, [1]); -1 for none.
int ColumnOf(const SparseTensorMatcher& m, int column) {
  if (const Node* unsq = m.Producer(column, "Unsqueeze")) {
    const auto axes = m.Ints(*unsq, 1, "axes");
    return axes == std::vector<int64_t>{1} || axes == std::vector<int64_t>{-1} ? unsq->Input(0) : -1;
  }
  const Node* reshape = m.Producer(column, "Reshape");
  if (!reshape) return -1;
  const int w = reshape->Input(0);
  if (m.Ints(*reshape, 1, nullptr) == std::vector<int64_t>{-1, 1}) return w;
  const Node* shape = m.Producer(m.Uncast(reshape->Input(1)), "Concat");
  const Node* of = shape && shape->NumInputs() == 2 ? m.Producer(m.Uncast(shape->Input(0)), "Shape") : nullptr;
  const Tensor* ones = of ? m.graph().FindConstant(shape->Input(1)) : nullptr;
  if (!of || of->Input(0) != w || !ones || ones->size() != 1 || ones->ScalarAsInt(0) != 1) return -1;
  return w;
}

// A segment sum of weighted rows: Mul(gathered rows, a column of weights).
struct WeightedRows {
  int gathered = -1;  // the rows before weighting
  int column = -1;    // the weights as a column [T, 1]
  int weights = -1;   // their sparse values [T]
};

std::optional<WeightedRows> WeightedRowsOf(const SparseTensorMatcher& m, int rows) {
  const Node* mul = m.Producer(rows, "Mul");
  if (!mul || mul->NumInputs() != 2) return std::nullopt;
  for (int k = 0; k < 2; ++k) {
    const int column = mul->Input(1 - k);
    const int w = ColumnOf(m, column);
    if (w >= 0 && m.Producer(mul->Input(k), "Gather")) return WeightedRows{mul->Input(k), column, w};
  }
  return std::nullopt;
}

// Whether `squares` is `column` squared: Pow(column, 2) or Mul(column, column).
bool SquaresOf(const SparseTensorMatcher& m, int squares, int column) {
  if (const Node* pow = m.Producer(squares, "Pow")) return pow->Input(0) == column && m.IsScalar(pow->Input(1), 2);
  const Node* mul = m.Producer(squares, "Mul");
  return mul && mul->Input(0) == column && mul->Input(1) == column;
}

// How the weighted sum `sum` (its result node's output `out`) is divided, if it is: the node that
// writes the mean or sqrt-n (DivNoNan's Where, or a Div) with its combiner and the divisor's segment
// sum node, or nullopt where nothing divides it by its weights.
struct WeightedDivision {
  size_t result = 0;
  BagCombiner combiner = kBagMean;
  size_t divisor_sum = 0;
};

std::optional<WeightedDivision> WeightedDivisionOf(const SparseTensorMatcher& m, const SegmentSum& sum,
                                                   const WeightedRows& rows) {
  const Graph& g = m.graph();
  const int out = g.nodes[sum.result].outputs[0];
  for (size_t d = 0; d < g.nodes.size(); ++d) {
    const Node& div = g.nodes[d];
    if (div.op != "Div" || div.outputs.empty() || div.Input(0) != out) continue;
    const int divisor = div.Input(1);
    int summed = divisor;
    WeightedDivision w{d, kBagMean, 0};
    if (const Node* root = m.Producer(divisor, "Sqrt")) {
      summed = root->Input(0);
      w.combiner = kBagSqrtN;
    }
    const Node* summing = m.Producer(summed);
    const size_t by = summing ? static_cast<size_t>(summing - g.nodes.data()) : 0;
    const std::optional<SegmentSum> ws = summing ? MatchSegmentSum(m, by) : std::nullopt;
    if (!ws || ws->result != by || m.Uncast(ws->segment) != m.Uncast(sum.segment)) continue;
    const bool weights_summed = w.combiner == kBagMean ? ws->rows == rows.column : SquaresOf(m, ws->rows, rows.column);
    if (!weights_summed) continue;
    w.divisor_sum = by;
    // DivNoNan: Where(Equal(divisor, 0), 0, the quotient).
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      const Node& where = g.nodes[k];
      if (where.op != "Where" || where.outputs.empty() || where.Input(2) != div.outputs[0]) continue;
      const Node* eq = m.Producer(where.Input(0), "Equal");
      if (eq && eq->Input(0) == divisor && m.IsScalar(eq->Input(1), 0) && m.IsScalar(where.Input(1), 0)) w.result = k;
    }
    return w;
  }
  return std::nullopt;
}

// A recognised segment sum: the node that becomes its bag and what the bag reads.
struct BagRewrite {
  size_t node;
  int table, ids;
  BagCombiner combiner;
  int weights = -1;             // a weighted bag's padded weights
  bool weights_pruned = false;  // the weights <= 0 dropped with their ids
};

// The nodes writing EmbeddingBag(table, Reshape(ids, [-1]), b * slots for b in [0, rows],
// Reshape(weights as FP32, [-1])) for `r`, appended to `out`; `bag` becomes that bag. Pruned
// weights are read as Where(weights > 0, weights, 0): a weight of 0 adds nothing to a bag's sum,
// nor to the weights' sum or squares a mean or sqrt-n divides by, as a dropped id does.
void WriteWeightedBag(Graph& graph, Node& bag, const BagRewrite& r, std::vector<Node>& out) {
  const int table = r.table, ids = r.ids, weights = r.weights;
  auto add = [&](const std::string& op, const std::string& what, std::vector<int> inputs, DType dtype, Shape shape,
                 std::map<std::string, AttributeValue> attrs = {}) {
    const std::string name = bag.name + "/" + what;
    const int value = graph.AddValue(Value{name, dtype, std::move(shape), true});
    out.push_back(Node{op, name, std::move(inputs), {value}, std::move(attrs)});
    return value;
  };
  auto constant = [&](const std::string& what, std::vector<int64_t> v, Shape shape) {
    return graph.AddConstant(bag.name + "/" + what, Tensor::FromVector<int64_t>(DType::kI64, shape, v));
  };
  const int flat = constant("flat", {-1}, {1});
  const int zero = constant("zero", {0}, {}), one = constant("one", {1}, {});
  const DType id_type = graph.values[static_cast<size_t>(ids)].dtype;
  const int shape = add("Shape", "ids_shape", {ids}, DType::kI64, {2});
  const int rows = add("Gather", "rows", {shape, zero}, DType::kI64, {});
  const int slots = add("Gather", "slots", {shape, one}, DType::kI64, {});
  const int bags =
      add("Range", "bags", {zero, add("Add", "rows_and_one", {rows, one}, DType::kI64, {}), one}, DType::kI64, {-1});
  const int offsets = add("Mul", "offsets", {bags, slots}, DType::kI64, {-1});
  int w = weights;
  if (graph.values[static_cast<size_t>(w)].dtype != DType::kF32) {
    w = add("Cast", "weights_fp32", {w}, DType::kF32, graph.values[static_cast<size_t>(w)].shape,
            {{"to", int64_t{1}}});  // ONNX's FLOAT
  }
  if (r.weights_pruned) {
    const int zero_weight =
        graph.AddConstant(bag.name + "/zero_weight", Tensor::FromVector<float>(DType::kF32, {}, {0.0f}));
    const Shape shape = graph.values[static_cast<size_t>(w)].shape;
    const int positive = add("Greater", "weights_kept", {w, zero_weight}, DType::kBool, shape);
    w = add("Where", "weights_pruned", {positive, w, zero_weight}, DType::kF32, shape);
  }
  const int flat_ids = add("Reshape", "flat_ids", {ids, flat}, id_type, {-1});
  const int flat_weights = add("Reshape", "flat_weights", {w, flat}, DType::kF32, {-1});
  bag.inputs = {table, flat_ids, offsets, flat_weights};
}

}  // namespace

StatusOr<int> FuseSegmentBags(Graph& graph) {
  SparseTensorMatcher m(graph);
  // Every segment sum first: a weighted mean's or sqrt-n's divisor is a segment sum of its weights,
  // part of that bag rather than one of its own.
  const size_t n = graph.nodes.size();
  std::vector<std::optional<SegmentSum>> sums(n);
  std::vector<std::optional<WeightedRows>> weighted(n);
  std::vector<std::optional<WeightedDivision>> divisions(n);
  std::vector<bool> divisor(n, false);
  for (size_t i = 0; i < n; ++i) {
    sums[i] = MatchSegmentSum(m, i);
    if (sums[i]) weighted[i] = WeightedRowsOf(m, sums[i]->rows);
    if (weighted[i]) divisions[i] = WeightedDivisionOf(m, *sums[i], *weighted[i]);
    if (divisions[i]) divisor[divisions[i]->divisor_sum] = true;
  }
  std::vector<BagRewrite> rewrites;
  for (size_t i = 0; i < n; ++i) {
    if (!sums[i] || divisor[i]) continue;
    SegmentSum& s = *sums[i];
    const Node& sum = graph.nodes[i];
    auto refuse = [&](const std::string& why) {
      return Unimplemented(sum.Describe() + " sums TensorFlow's sparse segments (tf2onnx's SegmentSum form), " + why +
                           ": rankd takes them over the entries of a padded ids input that are not -1 "
                           "(docs/passes.md)");
    };
    const std::optional<std::pair<int, int>> rows = GatheredRows(m, weighted[i] ? weighted[i]->gathered : s.rows);
    if (!rows) return refuse("of rows that are not a Gather of a constant table (weighted or not)");
    const int indices = m.ColumnZeroOf(s.segment);
    const int weight_values = weighted[i] ? weighted[i]->weights : -1;
    const std::optional<SparseTensorMatcher::Sparse> sparse =
        indices < 0 ? std::nullopt : m.SparseTensorOf(indices, rows->second, weight_values);
    if (!sparse && weighted[i] && indices >= 0 && m.SparseTensorOf(indices, rows->second)) {
      return refuse("weighted by values that are not a padded weights input's at the ids' entries");
    }
    if (!sparse) return refuse("whose ids and segment ids are not a sparse tensor made from padded ids");
    const int ids = sparse->ids;
    if (!m.CountsRowsOf(s.segments, ids) && !LargestPlusOne(m, s.segments, s.segment)) {
      return refuse("with a count of segments that is neither the ids' rows nor the largest segment id + 1");
    }
    if (divisions[i]) {  // a weighted mean or sqrt-n: the division writes the result
      s.result = divisions[i]->result;
      s.combiner = divisions[i]->combiner;
    }
    if (sparse->empty_rows >= 0) {
      // SparseFillEmptyRows gave each empty row a default id; safe_embedding_lookup_sparse zeroes
      // those rows again where no default id was asked for, as an empty bag is.
      const std::optional<size_t> zeroed = EmptyRowsZeroed(m, graph.nodes[s.result].outputs[0], sparse->empty_rows);
      if (!zeroed) {
        return refuse(
            "with empty rows filled by a default id that are not zeroed again (safe_embedding_lookup_sparse "
            "with a default_id)");
      }
      s.result = *zeroed;
      if (auto reshaped = FinalReshape(m, graph.nodes[s.result].outputs[0], ids)) s.result = *reshaped;
    }
    rewrites.push_back({s.result, rows->first, ids, s.combiner, sparse->weights, sparse->weights_pruned});
  }
  std::vector<std::vector<Node>> before(n);  // the nodes a weighted bag reads, written before it
  for (const BagRewrite& r : rewrites) {
    Node& node = graph.nodes[r.node];
    node.op = "EmbeddingBag";
    node.inputs = {r.table, r.ids};
    node.outputs.resize(1);
    node.attrs.clear();
    node.attrs["mode"] = std::string(BagCombinerName(r.combiner));
    if (r.weights >= 0) WriteWeightedBag(graph, node, r, before[r.node]);
  }
  std::vector<Node> nodes;
  for (size_t i = 0; i < n; ++i) {
    for (Node& b : before[i]) nodes.push_back(std::move(b));
    nodes.push_back(std::move(graph.nodes[i]));
  }
  graph.nodes = std::move(nodes);
  if (!rewrites.empty()) RemoveDeadNodes(graph);  // the sorting, counting and scattering, ops no backend runs
  return static_cast<int>(rewrites.size());
}

}  // namespace rankd
