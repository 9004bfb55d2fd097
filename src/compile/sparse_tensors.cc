#include "compile/sparse_tensors.h"

#include <cstdint>
#include <variant>

namespace rankd {

const Node* SparseTensorMatcher::Producer(int value, const char* op) const {
  if (value < 0 || static_cast<size_t>(value) >= producer_.size()) return nullptr;
  const int p = producer_[static_cast<size_t>(value)];
  if (p < 0) return nullptr;
  const Node& n = g_.nodes[static_cast<size_t>(p)];
  return !op || n.op == op ? &n : nullptr;
}

int SparseTensorMatcher::OutputIndex(int value) const {
  const Node* n = Producer(value);
  if (!n) return -1;
  for (size_t o = 0; o < n->outputs.size(); ++o) {
    if (n->outputs[o] == value) return static_cast<int>(o);
  }
  return -1;
}

int SparseTensorMatcher::Uncast(int value) const {
  for (const Node* n = Producer(value, "Cast"); n; n = Producer(value, "Cast")) value = n->Input(0);
  return value;
}

std::optional<std::vector<int64_t>> SparseTensorMatcher::Ints(const Node& n, int i, const char* attr) const {
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

int SparseTensorMatcher::MaskedIds(int mask) const {
  if (const Node* no = Producer(mask, "Not")) {
    const Node* eq = Producer(no->Input(0), "Equal");
    if (eq && IsScalar(eq->Input(1), -1)) return Uncast(eq->Input(0));
    return -1;
  }
  if (const Node* gt = Producer(mask, "Greater"); gt && IsScalar(gt->Input(1), -1)) return Uncast(gt->Input(0));
  if (const Node* ge = Producer(mask, "GreaterOrEqual"); ge && IsScalar(ge->Input(1), 0)) return Uncast(ge->Input(0));
  return -1;
}

bool SparseTensorMatcher::MarksNonNegative(int mask, int values) const {
  values = Uncast(values);
  if (const Node* no = Producer(mask, "Not")) {
    const Node* lt = Producer(no->Input(0), "Less");
    return lt && IsScalar(lt->Input(1), 0) && Uncast(lt->Input(0)) == values;
  }
  if (const Node* gt = Producer(mask, "Greater")) return IsScalar(gt->Input(1), -1) && Uncast(gt->Input(0)) == values;
  const Node* ge = Producer(mask, "GreaterOrEqual");
  return ge && IsScalar(ge->Input(1), 0) && Uncast(ge->Input(0)) == values;
}

bool SparseTensorMatcher::MarksPositive(int mask, int weights) const {
  const Node* gt = Producer(mask, "Greater");
  return gt && IsScalar(gt->Input(1), 0) && Uncast(gt->Input(0)) == Uncast(weights);
}

bool SparseTensorMatcher::RetainsWeighted(int mask, int values, int weights, bool& pruned) const {
  if (MarksPositive(mask, weights)) {
    pruned = true;
    return true;
  }
  const Node* both = Producer(mask, "And");
  if (!both) return false;
  for (int k = 0; k < 2; ++k) {
    if (!MarksNonNegative(both->Input(k), values)) continue;
    const int other = both->Input(1 - k);
    if (MarksPositive(other, weights)) {
      pruned = true;
      return true;
    }
    // ones_like(weights, bool): a fill of true shaped as the weights.
    const Node* ones = Producer(other, "ConstantOfShape");
    const Node* shape = ones ? Producer(ones->Input(0), "Shape") : nullptr;
    if (shape && Uncast(shape->Input(0)) == Uncast(weights) && Fills(*ones, 1.0)) return true;
  }
  return false;
}

int SparseTensorMatcher::PaddedWeightsOf(int weights, int indices) const {
  const Node* gather = Producer(Uncast(weights), "GatherND");
  if (!gather) return -1;
  const int padded = gather->Input(0);
  if (Uncast(gather->Input(1)) == Uncast(indices)) return padded;
  const Node* where = Producer(Uncast(gather->Input(1)), "Transpose");
  const Node* nonzero = where ? Producer(where->Input(0), "NonZero") : nullptr;
  const Node* no = nonzero ? Producer(nonzero->Input(0), "Not") : nullptr;
  const Node* eq = no ? Producer(no->Input(0), "Equal") : nullptr;
  if (!eq || eq->Input(0) != padded || !IsScalar(eq->Input(1), 0)) return -1;
  return padded;
}

int SparseTensorMatcher::SlicedColumnZero(const Node* slice) const {
  if (!slice || slice->op != "Slice") return -1;
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

int SparseTensorMatcher::ColumnZeroOf(int segment) const {
  segment = Uncast(segment);
  if (const Node* g = Producer(segment, "Gather"); g && g->GetInt("axis", 0) == 1 && IsScalar(g->Input(1), 0)) {
    return g->Input(0);
  }
  const Node* sq = Producer(segment, "Squeeze");
  if (!sq || Ints(*sq, 1, "axes") != std::vector<int64_t>{1}) return -1;
  return SlicedColumnZero(Producer(sq->Input(0), "Slice"));
}

bool SparseTensorMatcher::CountsRowsOf(int value, int ids) const {
  value = Uncast(value);
  for (const Node* n = Producer(value); n && (n->op == "Squeeze" || n->op == "Unsqueeze" || n->op == "Reshape");
       n = Producer(value)) {
    value = Uncast(n->Input(0));
  }
  if (const Node* prod = Producer(value, "ReduceProd")) value = prod->Input(0);  // of one entry
  if (const Node* g = Producer(value, "Gather"); g && IsScalar(g->Input(1), 0)) {
    return FirstEntryCountsRowsOf(g->Input(0), ids);
  }
  const Node* s = Producer(value, "Slice");
  return s && Ints(*s, 1, "starts") == std::vector<int64_t>{0} && Ints(*s, 2, "ends") == std::vector<int64_t>{1} &&
         FirstEntryCountsRowsOf(s->Input(0), ids);
}

bool SparseTensorMatcher::FirstEntryCountsRowsOf(int shape, int ids) const {
  shape = Uncast(shape);
  if (const Node* s = Producer(shape, "Shape")) return Uncast(s->Input(0)) == ids;
  // SparseReshape's new shape: a -1 entry replaced, Where(Less(new, 0), missing, new).
  if (const Node* w = Producer(shape, "Where")) {
    const Node* less = Producer(w->Input(0), "Less");
    return less && less->Input(0) == w->Input(2) && IsScalar(less->Input(1), 0) &&
           FirstEntryCountsRowsOf(w->Input(2), ids);
  }
  const Node* c = Producer(shape, "Concat");
  return c && c->GetInt("axis", 0) == 0 && c->NumInputs() >= 1 && CountsRowsOf(c->Input(0), ids);
}

bool SparseTensorMatcher::IsZeros(int value) const {
  if (const Node* c = Producer(value, "ConstantOfShape")) return Fills(*c, 0.0);
  const Tensor* t = g_.FindConstant(value);
  if (!t || t->size() == 0) return false;
  for (int64_t k = 0; k < t->size(); ++k) {
    if (t->ScalarAsDouble(k) != 0.0) return false;
  }
  return true;
}

bool SparseTensorMatcher::Fills(const Node& n, double value) const {
  auto it = n.attrs.find("value");
  if (it == n.attrs.end()) return value == 0.0;  // ConstantOfShape's default: a float zero
  const Tensor* t = std::get_if<Tensor>(&it->second);
  return t && t->size() == 1 && t->ScalarAsDouble(0) == value;
}

int SparseTensorMatcher::StridesOf(int strides) const {
  const Node* prod = Producer(strides, "ReduceProd");
  if (!prod || prod->GetInt("keepdims", 1) != 0 || Ints(*prod, 1, "axes") != std::vector<int64_t>{1}) return -1;
  const Node* terms = Producer(prod->Input(0), "Where");
  if (!terms || !IsScalar(terms->Input(1), 1)) return -1;
  const Tensor* lower = g_.FindConstant(Uncast(terms->Input(0)));
  if (!lower || lower->shape() != Shape{2, 2}) return -1;
  const bool triangle = lower->ScalarAsDouble(0) != 0 && lower->ScalarAsDouble(1) == 0 &&
                        lower->ScalarAsDouble(2) != 0 && lower->ScalarAsDouble(3) != 0;
  return triangle ? terms->Input(2) : -1;
}

int SparseTensorMatcher::UnreshapedIndices(int indices) const {
  const Node* div = Producer(indices, "Div");
  const Node* mod = div ? Producer(div->Input(0), "Mod") : nullptr;
  const Node* unsq = mod ? Producer(mod->Input(0), "Unsqueeze") : nullptr;
  const Node* flat = unsq ? Producer(unsq->Input(0), "MatMul") : nullptr;
  if (!flat || Ints(*unsq, 1, "axes") != std::vector<int64_t>{1}) return -1;
  const int old_shape = StridesOf(flat->Input(1)), new_shape = StridesOf(div->Input(1));
  if (old_shape < 0 || new_shape < 0) return -1;
  // The divisors of the Mod: the old shape's product, then the new strides but the last.
  const Node* pad = Producer(mod->Input(1), "Pad");
  const Node* cat = pad ? Producer(pad->Input(0), "Concat") : nullptr;
  const Node* product = cat && cat->NumInputs() == 2 ? Producer(cat->Input(0), "ReduceProd") : nullptr;
  if (!product || cat->Input(1) != div->Input(1) || Uncast(product->Input(0)) != Uncast(old_shape)) return -1;
  // The same shape when the new one's last entry is the old one's (entry 1): each index keeps its
  // row and slot, whatever the first entry.
  int wanted = Uncast(new_shape);
  if (const Node* w = Producer(wanted, "Where")) {
    const Node* less = Producer(w->Input(0), "Less");
    if (!less || less->Input(0) != w->Input(2)) return -1;
    wanted = Uncast(w->Input(2));
  }
  const Node* entries = Producer(wanted, "Concat");
  if (!entries || entries->NumInputs() != 2 || entries->GetInt("axis", 0) != 0) return -1;
  int last = Uncast(entries->Input(1));
  for (const Node* n = Producer(last); n && (n->op == "Unsqueeze" || n->op == "Reshape"); n = Producer(last)) {
    last = Uncast(n->Input(0));
  }
  const Node* entry = Producer(last, "Gather");
  if (!entry || !IsScalar(entry->Input(1), 1) || Uncast(entry->Input(0)) != Uncast(old_shape)) return -1;
  return flat->Input(0);
}

std::optional<SparseTensorMatcher::Sparse> SparseTensorMatcher::SparseTensorOf(int indices, int values,
                                                                               int weights) const {
  indices = Uncast(indices);
  values = Uncast(values);
  if (weights >= 0) weights = Uncast(weights);
  // SparseFillEmptyRows: the tensor's entries, then a default id at (row, 0) of each empty row.
  const Node* ci = Producer(indices, "Concat");
  const Node* cv = Producer(values, "Concat");
  if (ci && cv) {
    if (ci->NumInputs() != 2 || cv->NumInputs() != 2 || ci->GetInt("axis", 0) != 0 || cv->GetInt("axis", 0) != 0) {
      return std::nullopt;
    }
    const Node* pad = Producer(ci->Input(1), "Pad");
    const Node* unsq = pad ? Producer(pad->Input(0), "Unsqueeze") : nullptr;
    const Node* empty_rows = unsq ? Producer(unsq->Input(0), "Compress") : nullptr;
    const Node* range = empty_rows ? Producer(empty_rows->Input(0), "Range") : nullptr;
    const Node* expand = Producer(cv->Input(1), "Expand");
    const Node* count = expand ? Producer(expand->Input(1), "Shape") : nullptr;
    if (!range || !count || count->Input(0) != empty_rows->outputs[0] || !IsScalar(range->Input(0), 0) ||
        !IsScalar(range->Input(2), 1)) {
      return std::nullopt;
    }
    const int empty = empty_rows->Input(1);
    const Node* scatter = Producer(empty, "ScatterElements");
    const Node* all = scatter ? Producer(scatter->Input(0), "ConstantOfShape") : nullptr;
    const Node* none = scatter ? Producer(scatter->Input(2), "ConstantOfShape") : nullptr;
    const Node* present = scatter ? Producer(scatter->Input(1), "Unique") : nullptr;
    if (!all || !none || !present || !Fills(*all, 1.0) || !Fills(*none, 0.0) || OutputIndex(scatter->Input(1)) != 0 ||
        Uncast(SlicedColumnZero(Producer(present->Input(0), "Slice"))) != Uncast(ci->Input(0))) {
      return std::nullopt;
    }
    // The weights filled by their own SparseFillEmptyRows: weight 1 at each filled id.
    int kept_weights = -1;
    if (weights >= 0) {
      const Node* cw = Producer(weights, "Concat");
      const Node* ones =
          cw && cw->NumInputs() == 2 && cw->GetInt("axis", 0) == 0 ? Producer(cw->Input(1), "Expand") : nullptr;
      if (!ones || !IsScalar(ones->Input(0), 1)) return std::nullopt;
      kept_weights = cw->Input(0);
    }
    std::optional<Sparse> kept = SparseTensorOf(ci->Input(0), cv->Input(0), kept_weights);
    if (!kept || kept->empty_rows >= 0 || !CountsRowsOf(range->Input(1), kept->ids) ||
        !CountsRowsOf(all->Input(0), kept->ids)) {
      return std::nullopt;
    }
    kept->empty_rows = empty;
    return kept;
  }
  // sparse_retain of the values >= 0.
  const Node* gi = Producer(indices, "Gather");
  const Node* gv = Producer(values, "Gather");
  if (gi && gv) {
    if (gi->GetInt("axis", 0) != 0 || gv->GetInt("axis", 0) != 0 || gi->Input(1) != gv->Input(1)) return std::nullopt;
    const Node* flat = Producer(gi->Input(1), "Reshape");
    if (!flat || Ints(*flat, 1, nullptr) != std::vector<int64_t>{-1}) return std::nullopt;
    int where = flat->Input(0);
    if (const Node* t = Producer(where, "Transpose")) where = t->Input(0);
    const Node* nz = Producer(where, "NonZero");
    if (!nz) return std::nullopt;
    if (weights < 0) {
      if (!MarksNonNegative(nz->Input(0), gv->Input(0))) return std::nullopt;
      std::optional<Sparse> kept = SparseTensorOf(gi->Input(0), gv->Input(0));
      if (!kept || kept->empty_rows >= 0) return std::nullopt;
      return kept;
    }
    // The weights retained by the same mask, through a Where of their own.
    const Node* gw = Producer(weights, "Gather");
    const Node* wflat = gw && gw->GetInt("axis", 0) == 0 ? Producer(gw->Input(1), "Reshape") : nullptr;
    if (!wflat || Ints(*wflat, 1, nullptr) != std::vector<int64_t>{-1}) return std::nullopt;
    int wwhere = wflat->Input(0);
    if (const Node* t = Producer(wwhere, "Transpose")) wwhere = t->Input(0);
    const Node* wnz = Producer(wwhere, "NonZero");
    bool pruned = false;
    if (!wnz || wnz->Input(0) != nz->Input(0) || !RetainsWeighted(nz->Input(0), gv->Input(0), gw->Input(0), pruned)) {
      return std::nullopt;
    }
    std::optional<Sparse> kept = SparseTensorOf(gi->Input(0), gv->Input(0), gw->Input(0));
    if (!kept || kept->empty_rows >= 0) return std::nullopt;
    kept->weights_pruned = kept->weights_pruned || pruned;
    return kept;
  }
  // SparseReshape to the shape it has: the values as they are.
  if (const int unreshaped = UnreshapedIndices(indices); unreshaped >= 0) {
    std::optional<Sparse> kept = SparseTensorOf(unreshaped, values, weights);
    if (!kept || kept->empty_rows >= 0) return std::nullopt;
    return kept;
  }
  // to_sparse_input: GatherND(ids, Transpose(NonZero(mask of ids))).
  const Node* gather = Producer(values, "GatherND");
  const Node* t = Producer(indices, "Transpose");
  if (!gather || !t || t->GetInts("perm") != std::vector<int64_t>{1, 0} || Uncast(gather->Input(1)) != indices) {
    return std::nullopt;
  }
  const Node* nz = Producer(t->Input(0), "NonZero");
  const int ids = nz ? MaskedIds(nz->Input(0)) : -1;
  if (ids < 0 || Uncast(gather->Input(0)) != ids) return std::nullopt;
  Sparse sparse{ids, -1};
  if (weights >= 0) {
    sparse.weights = PaddedWeightsOf(weights, indices);
    if (sparse.weights < 0) return std::nullopt;
  }
  return sparse;
}

}  // namespace rankd
