// User-side hoisting: the part of a ranking graph that reads only user inputs runs once per user.
//
// The graph was written for one row per candidate, user rows repeated. The pass walks it in order
// and gives every value a side:
//   free       the same whatever the rows (constants, sequence lengths read from shapes);
//   user rows  row i belongs to user i, and the same value with rows repeated is what the original
//              graph computed (the invariant every rule below keeps);
//   user meta  a small integer tensor (a shape) whose elements are free or the batch size itself;
//   user ragged  a user ragged input's values / offsets;
//   candidate  everything else, computed as before on one row per candidate.
// A node reading user values becomes user-side only when a rule proves it row-wise: element-wise
// ops with free operands that do not broadcast into the row axis, MatMul/Gemm against weights,
// lookups, concat/slice/reduce/softmax/normalise off axis 0, reshapes that keep the row count, and
// the shape arithmetic PyTorch exports around them. Any other reader is a candidate node: its user
// inputs are replaced by their candidate twins, Gather(value, request_index) for rows (one per
// value, shared) and a clone of the shape computation over the twins for metas. So a rule that is
// missing costs speed, never correctness.
#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>

#include "compile/passes.h"

namespace rankd {
namespace {

enum class Side { kFree, kRows, kMeta, kRaggedValues, kRaggedOffsets, kCandidate };
enum class Elem { kFree, kBatch, kUnknown };

struct Info {
  Side side = Side::kCandidate;
  std::vector<Elem> elems;  // kMeta: one per element, flattened
};

const std::set<std::string>& ElementwiseOps() {
  static const std::set<std::string> ops = {
      "Add",        "Sub",         "Mul",       "Div",     "Pow",         "Max",
      "Min",        "Mod",         "Where",     "Equal",   "Greater",     "GreaterOrEqual",
      "Less",       "LessOrEqual", "And",       "Or",      "Xor",         "Not",
      "Relu",       "Sigmoid",     "Tanh",      "Exp",     "Log",         "Sqrt",
      "Reciprocal", "Neg",         "Abs",       "Erf",     "Clip",        "Cast",
      "Identity",   "Softplus",    "LeakyRelu", "Gelu",    "HardSigmoid", "Sign",
      "Floor",      "Ceil",        "Round",     "IsNaN",   "IsInf",       "Elu",
      "Selu",       "Sin",         "Cos",       "Dropout", "MulAdd",      "FusedElementwise"};
  return ops;
}

// Ops that only move or relabel data: a user side made only of these saves nothing.
const std::set<std::string>& MovementOps() {
  static const std::set<std::string> ops = {"Shape",   "Identity",       "Cast",      "Reshape", "Unsqueeze",
                                            "Squeeze", "Flatten",        "Transpose", "Concat",  "Slice",
                                            "Split",   "RaggedToPadded", "Expand",    "Dropout"};
  return ops;
}

class Hoister {
 public:
  Hoister(const Graph& graph, const std::vector<PlanValue>& shapes, int64_t plan_rows)
      : in_(graph), shapes_(shapes), plan_rows_(plan_rows) {}

  HoistReport Run(const std::vector<int>& user_rows, const std::vector<std::pair<int, int>>& user_ragged, Graph& out);

 private:
  const Shape& ShapeOf(int v) const { return shapes_[static_cast<size_t>(v)].shape; }
  int64_t Rank(int v) const { return static_cast<int64_t>(ShapeOf(v).size()); }
  const Tensor* ValueOf(int v) const { return shapes_[static_cast<size_t>(v)].constant; }
  std::vector<int64_t> IntsOf(int v) const;
  // A negative axis counted from the end.
  static int64_t Normalize(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }
  // The node's axes, normalised, from its "axes" attribute or its input `input` (a plan-time
  // constant); nullopt when neither is known.
  std::optional<std::vector<int64_t>> Axes(const Node& n, int input, int64_t rank) const;
  Side SideOf(int v) const { return v < 0 ? Side::kFree : info_[static_cast<size_t>(v)].side; }
  std::vector<Elem> ElemsOf(int v) const;
  // The sides of a user-side node's outputs, or nullopt when no rule proves it row-wise.
  std::optional<std::vector<Info>> UserRule(const Node& n) const;
  std::optional<std::vector<Info>> RowsRule(const Node& n) const;
  std::optional<std::vector<Info>> MetaRule(const Node& n) const;
  // A value's candidate twin (emitting the nodes that compute it); -1 when it has none.
  int Twin(int v);
  // Emits Gather(value, request_index) (the per-user value `name` to the candidates); returns its output.
  int EmitGather(int value, const std::string& name, DType dtype);
  // In a candidate Concat off axis 0, each run of two or more user-rows inputs becomes one
  // user-side Concat gathered once (DIN's eight profile embeddings: one gather, not eight).
  void GroupUserConcatInputs(Node& concat);

  const Graph& in_;
  const std::vector<PlanValue>& shapes_;
  int64_t plan_rows_;
  Graph* out_ = nullptr;
  int request_index_ = -1;
  std::vector<Info> info_;
  std::vector<int> producer_;
  std::unordered_map<int, int> twins_;
  std::vector<std::string> gathered_;
};

std::vector<int64_t> Hoister::IntsOf(int v) const {
  std::vector<int64_t> out;
  const Tensor* t = ValueOf(v);
  if (!t || (t->dtype() != DType::kI64 && t->dtype() != DType::kI32)) return out;
  for (int64_t i = 0; i < t->size(); ++i) out.push_back(t->ScalarAsInt(i));
  return out;
}

std::optional<std::vector<int64_t>> Hoister::Axes(const Node& n, int input, int64_t rank) const {
  std::vector<int64_t> axes;
  if (n.Has("axes")) {
    axes = n.GetInts("axes");
  } else if (n.HasInput(input) && ValueOf(n.inputs[static_cast<size_t>(input)])) {
    axes = IntsOf(n.inputs[static_cast<size_t>(input)]);
  } else {
    return std::nullopt;
  }
  for (int64_t& a : axes) a = Normalize(a, rank);
  return axes;
}

std::vector<Elem> Hoister::ElemsOf(int v) const {
  if (SideOf(v) == Side::kMeta) return info_[static_cast<size_t>(v)].elems;
  int64_t count = 1;
  for (int64_t d : ShapeOf(v)) count *= d;
  return std::vector<Elem>(static_cast<size_t>(std::max<int64_t>(count, 0)), Elem::kFree);
}

// A meta whose elements are all free is free.
Info MetaInfo(std::vector<Elem> elems) {
  bool free = std::all_of(elems.begin(), elems.end(), [](Elem e) { return e == Elem::kFree; });
  return free ? Info{Side::kFree, {}} : Info{Side::kMeta, std::move(elems)};
}

std::optional<std::vector<Info>> Hoister::UserRule(const Node& n) const {
  bool rows = false;
  for (int v : n.inputs) {
    Side s = SideOf(v);
    rows = rows || s == Side::kRows || s == Side::kRaggedValues || s == Side::kRaggedOffsets;
  }
  auto result = rows ? RowsRule(n) : MetaRule(n);
  if (!result) return result;
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    int id = n.outputs[o];
    // Every row-wise result must have one row per (repeated) user in the shape plan.
    if (id >= 0 && (*result)[o].side == Side::kRows && (Rank(id) == 0 || ShapeOf(id)[0] != plan_rows_)) {
      return std::nullopt;
    }
  }
  return result;
}

std::optional<std::vector<Info>> Hoister::RowsRule(const Node& n) const {
  const std::string& op = n.op;
  const Info rows{Side::kRows, {}};
  auto all_outputs = [&](const Info& info) { return std::vector<Info>(n.outputs.size(), info); };
  auto side = [&](int i) { return n.HasInput(i) ? SideOf(n.inputs[static_cast<size_t>(i)]) : Side::kFree; };
  auto in = [&](int i) { return n.inputs[static_cast<size_t>(i)]; };
  for (int v : n.inputs) {
    if (SideOf(v) == Side::kMeta && op != "Reshape" && op != "Expand") return std::nullopt;
  }
  if (op == "KeyedRows") {  // one table's (unmerged): an id's row for each id, on the ids' side
    if (n.NumInputs() == 2 && side(1) == Side::kFree && side(0) != Side::kRaggedOffsets) {
      return all_outputs(Info{side(0), {}});
    }
    return std::nullopt;
  }
  if (op == "EmbeddingBag") {
    // Weighted (a fourth input): the weights are the same user's, ragged beside the ids.
    bool ragged = (n.NumInputs() == 3 || (n.NumInputs() == 4 && side(3) == Side::kRaggedValues)) &&
                  side(1) == Side::kRaggedValues && side(2) == Side::kRaggedOffsets;
    bool padded = n.NumInputs() == 2 && side(1) == Side::kRows;
    if (side(0) == Side::kFree && (ragged || padded)) return all_outputs(rows);
    return std::nullopt;
  }
  if (op == "HashStrings") {  // a row's strings hashed to its ids
    if (side(0) == Side::kRows) return all_outputs(rows);
    return std::nullopt;
  }
  if (op == "RaggedToPadded") {
    if (side(0) == Side::kRaggedValues && side(1) == Side::kRaggedOffsets) return all_outputs(rows);
    return std::nullopt;
  }
  for (int v : n.inputs) {
    if (SideOf(v) == Side::kRaggedValues || SideOf(v) == Side::kRaggedOffsets) return std::nullopt;
  }
  int64_t out_rank = n.outputs.empty() || n.outputs[0] < 0 ? -1 : Rank(n.outputs[0]);
  if (ElementwiseOps().count(op)) {
    // Rows operands span the output's rank (row axis at 0); free ones broadcast from the right
    // without reaching axis 0, or have one row there.
    for (int i = 0; i < n.NumInputs(); ++i) {
      if (!n.HasInput(i)) continue;
      if (side(i) == Side::kRows && Rank(in(i)) != out_rank) return std::nullopt;
      if (side(i) == Side::kFree && Rank(in(i)) == out_rank && ShapeOf(in(i))[0] != 1) return std::nullopt;
    }
    return all_outputs(rows);
  }
  if (op == "MatMul") {
    int64_t ra = Rank(in(0)), rb = Rank(in(1));
    // A free operand of rank <= 2 is a matrix (or vector); past that its batch dimensions
    // broadcast against the rows operand's and must not reach axis 0.
    auto free_fits = [&](int64_t free_rank, int free_input, int64_t rows_rank) {
      return free_rank <= 2 || free_rank < rows_rank || (free_rank == rows_rank && ShapeOf(in(free_input))[0] == 1);
    };
    bool ok = (side(0) == Side::kRows && side(1) == Side::kFree && ra >= 2 && free_fits(rb, 1, ra)) ||
              (side(0) == Side::kFree && side(1) == Side::kRows && rb >= 3 && free_fits(ra, 0, rb)) ||
              (side(0) == Side::kRows && side(1) == Side::kRows && ra >= 3 && ra == rb);
    if (n.HasInput(2) && side(2) != Side::kFree) ok = false;  // a fused bias (FuseGemmEpilogues)
    return ok ? std::optional(all_outputs(rows)) : std::nullopt;
  }
  if (op == "Gemm") {
    bool ok = side(0) == Side::kRows && n.GetInt("transA", 0) == 0 && side(1) == Side::kFree && side(2) == Side::kFree;
    if (ok && n.HasInput(2) && Rank(in(2)) == 2 && ShapeOf(in(2))[0] != 1) ok = false;
    return ok ? std::optional(all_outputs(rows)) : std::nullopt;
  }
  if (op == "Gather") {
    int64_t axis = Normalize(n.GetInt("axis", 0), Rank(in(0)));
    bool lookup = side(0) == Side::kFree && side(1) == Side::kRows && axis == 0;
    bool select = side(0) == Side::kRows && side(1) == Side::kFree && axis >= 1;
    return lookup || select ? std::optional(all_outputs(rows)) : std::nullopt;
  }
  if (op == "Concat" || op == "Split" || op == "Softmax" || op == "LogSoftmax" || op == "Flatten" ||
      op == "LayerNormalization") {
    // Off the row axis, every rows input (Concat: all of them) and free parameters.
    int64_t axis = Normalize(n.GetInt("axis", op == "Concat" || op == "Split" ? 0
                                              : op == "LayerNormalization"    ? -1
                                                                              : 1),
                             Rank(in(0)));
    if (axis < 1) return std::nullopt;
    for (int i = 0; i < n.NumInputs(); ++i) {
      bool data = op == "Concat" || i == 0;
      if (n.HasInput(i) && side(i) != (data ? Side::kRows : Side::kFree)) return std::nullopt;
    }
    return all_outputs(rows);
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    int64_t rank = op == "Unsqueeze" ? out_rank : Rank(in(0));
    auto axes = Axes(n, 1, rank);
    if (side(0) != Side::kRows || !axes || axes->empty()) return std::nullopt;
    if (std::find(axes->begin(), axes->end(), 0) != axes->end()) return std::nullopt;
    return all_outputs(rows);
  }
  if (op == "Transpose") {
    std::vector<int64_t> perm = n.GetInts("perm");
    bool ok = side(0) == Side::kRows && ((perm.empty() && Rank(in(0)) == 1) || (!perm.empty() && perm[0] == 0));
    return ok ? std::optional(all_outputs(rows)) : std::nullopt;
  }
  if (op == "Slice") {
    auto axes = n.Has("axes") || n.HasInput(3) ? Axes(n, 3, Rank(in(0))) : std::nullopt;
    if (side(0) != Side::kRows || !axes) return std::nullopt;
    for (int i = 1; i < n.NumInputs(); ++i) {
      if (side(i) != Side::kFree) return std::nullopt;
    }
    if (std::find(axes->begin(), axes->end(), 0) != axes->end()) return std::nullopt;
    return all_outputs(rows);
  }
  if (op.rfind("Reduce", 0) == 0) {
    auto axes = Axes(n, 1, Rank(in(0)));
    if (side(0) != Side::kRows || !axes || axes->empty()) return std::nullopt;
    if (std::find(axes->begin(), axes->end(), 0) != axes->end()) return std::nullopt;
    return all_outputs(rows);
  }
  if (op == "Reshape" || op == "Expand") {
    // The row count survives when the target's first element is the batch size (or, for
    // Reshape, 0 = copy it; -1 when the shape plan shows it resolving to the row count) and no
    // other element depends on it.
    if (side(0) != Side::kRows) return std::nullopt;
    std::vector<Elem> target = ElemsOf(in(1));
    std::vector<int64_t> known = IntsOf(in(1));
    if (target.empty() || known.size() != target.size()) return std::nullopt;
    for (size_t i = 1; i < target.size(); ++i) {
      if (target[i] != Elem::kFree) return std::nullopt;
    }
    bool first = target[0] == Elem::kBatch;
    if (op == "Reshape" && target[0] == Elem::kFree && n.GetInt("allowzero", 0) == 0) {
      first = known[0] == 0 || (known[0] == -1 && ShapeOf(n.outputs[0])[0] == ShapeOf(in(0))[0]);
    }
    if (op == "Expand") {
      first = first || (target[0] == Elem::kFree && known[0] == 1);
      first = first && static_cast<int64_t>(target.size()) == Rank(in(0));
    }
    return first ? std::optional(all_outputs(rows)) : std::nullopt;
  }
  if (op == "Shape") {
    if (side(0) != Side::kRows) return std::nullopt;
    int64_t rank = Rank(in(0));
    std::vector<Elem> elems(static_cast<size_t>(rank), Elem::kFree);
    if (rank > 0) elems[0] = Elem::kBatch;
    int64_t start = std::clamp(Normalize(n.GetInt("start", 0), rank), int64_t{0}, rank);
    int64_t end = std::clamp(Normalize(n.GetInt("end", rank), rank), start, rank);
    return std::vector<Info>{MetaInfo({elems.begin() + start, elems.begin() + end})};
  }
  return std::nullopt;
}

std::optional<std::vector<Info>> Hoister::MetaRule(const Node& n) const {
  // Shape arithmetic: inputs are metas and free values, all small integer tensors.
  const std::string& op = n.op;
  auto in = [&](int i) { return n.inputs[static_cast<size_t>(i)]; };
  if (n.outputs.size() != 1 || n.outputs[0] < 0 || Rank(n.outputs[0]) > 1) return std::nullopt;
  std::vector<Elem> a = ElemsOf(in(0));
  if (op == "Identity" || op == "Cast" || op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" || op == "Flatten") {
    for (int i = 1; i < n.NumInputs(); ++i) {
      if (n.HasInput(i) && SideOf(in(i)) != Side::kFree) return std::nullopt;
    }
    return std::vector<Info>{MetaInfo(a)};
  }
  if (op == "Gather" || op == "Slice") {
    std::vector<int64_t> picked;
    if (op == "Gather") {
      if (n.GetInt("axis", 0) != 0 || !ValueOf(in(1))) return std::nullopt;
      picked = IntsOf(in(1));
    } else {
      std::vector<int64_t> starts = IntsOf(in(1)), ends = IntsOf(in(2));
      std::vector<int64_t> steps = n.HasInput(4) ? IntsOf(in(4)) : std::vector<int64_t>{1};
      if (starts.size() != 1 || ends.size() != 1 || steps.size() != 1 || steps[0] <= 0) return std::nullopt;
      if (n.HasInput(3) && IntsOf(in(3)) != std::vector<int64_t>{0}) return std::nullopt;
      int64_t size = static_cast<int64_t>(a.size());
      int64_t b = std::clamp(Normalize(starts[0], size), int64_t{0}, size);
      int64_t e = std::clamp(Normalize(std::min(ends[0], size), size), int64_t{0}, size);
      for (int64_t i = b; i < e; i += steps[0]) picked.push_back(i);
    }
    std::vector<Elem> out;
    for (int64_t i : picked) {
      i = Normalize(i, static_cast<int64_t>(a.size()));
      if (i < 0 || i >= static_cast<int64_t>(a.size())) return std::nullopt;
      out.push_back(a[static_cast<size_t>(i)]);
    }
    return std::vector<Info>{MetaInfo(out)};
  }
  if (op == "Concat") {
    std::vector<Elem> out;
    for (int v : n.inputs) {
      std::vector<Elem> e = ElemsOf(v);
      out.insert(out.end(), e.begin(), e.end());
    }
    return std::vector<Info>{MetaInfo(out)};
  }
  if (ElementwiseOps().count(op)) {
    // Arithmetic on the batch size gives something else: unknown.
    int64_t count = Rank(n.outputs[0]) == 0 ? 1 : ShapeOf(n.outputs[0])[0];
    std::vector<Elem> out(static_cast<size_t>(count), Elem::kFree);
    for (int v : n.inputs) {
      if (v < 0) continue;
      std::vector<Elem> e = ElemsOf(v);
      for (int64_t i = 0; i < count; ++i) {
        Elem x = e.size() == 1 ? e[0] : static_cast<size_t>(i) < e.size() ? e[static_cast<size_t>(i)] : Elem::kUnknown;
        if (x != Elem::kFree) out[static_cast<size_t>(i)] = Elem::kUnknown;
      }
    }
    return std::vector<Info>{MetaInfo(out)};
  }
  return std::nullopt;
}

int Hoister::Twin(int v) {
  Side s = SideOf(v);
  if (s == Side::kFree || s == Side::kCandidate) return v;
  auto it = twins_.find(v);
  if (it != twins_.end()) return it->second;
  if (s == Side::kRows) {
    const Value& value = in_.values[static_cast<size_t>(v)];
    return twins_[v] = EmitGather(v, value.name, value.dtype);
  }
  if (s == Side::kMeta) {
    // The same shape computation over the twins of its inputs.
    int p = producer_[static_cast<size_t>(v)];
    if (p < 0) return -1;
    Node clone = in_.nodes[static_cast<size_t>(p)];
    for (int& i : clone.inputs) {
      if (i < 0) continue;
      i = Twin(i);
      if (i < 0) return -1;
    }
    clone.name += ".per_candidate";
    for (int& o : clone.outputs) {
      if (o < 0) continue;
      const Value& value = in_.values[static_cast<size_t>(o)];
      int twin = out_->AddValue({value.name + ".per_candidate", value.dtype, {}, false});
      twins_[o] = twin;
      o = twin;
    }
    out_->nodes.push_back(std::move(clone));
    return twins_[v];
  }
  return -1;  // ragged user inputs have no per-candidate form here
}

int Hoister::EmitGather(int value, const std::string& name, DType dtype) {
  int twin = out_->AddValue({name + ".per_candidate", dtype, {}, false});
  Node gather;
  gather.op = "Gather";
  gather.name = "hoist.gather." + name;
  gather.inputs = {value, request_index_};
  gather.outputs = {twin};
  gather.attrs["axis"] = int64_t{0};
  out_->nodes.push_back(std::move(gather));
  gathered_.push_back(name);
  return twin;
}

void Hoister::GroupUserConcatInputs(Node& concat) {
  if (concat.op != "Concat" || concat.outputs.empty() || concat.outputs[0] < 0) return;
  if (Normalize(concat.GetInt("axis", 0), Rank(concat.outputs[0])) < 1) return;
  std::vector<int> inputs;
  for (size_t i = 0; i < concat.inputs.size();) {
    size_t end = i;
    while (end < concat.inputs.size() && concat.inputs[end] >= 0 && SideOf(concat.inputs[end]) == Side::kRows) ++end;
    if (end - i < 2) {
      inputs.push_back(concat.inputs[i]);
      ++i;
      continue;
    }
    std::string name = concat.name + ".user_part" + std::to_string(i);
    DType dtype = in_.values[static_cast<size_t>(concat.inputs[i])].dtype;
    int part = out_->AddValue({name, dtype, {}, false});
    Node user;
    user.op = "Concat";
    user.name = name;
    user.inputs.assign(concat.inputs.begin() + static_cast<long>(i), concat.inputs.begin() + static_cast<long>(end));
    user.outputs = {part};
    user.attrs["axis"] = concat.GetInt("axis", 0);
    out_->nodes.push_back(std::move(user));
    inputs.push_back(EmitGather(part, name, dtype));
    i = end;
  }
  concat.inputs = std::move(inputs);
}

HoistReport Hoister::Run(const std::vector<int>& user_rows, const std::vector<std::pair<int, int>>& user_ragged,
                         Graph& out) {
  HoistReport report;
  out = in_;
  out.nodes.clear();
  out_ = &out;
  info_.assign(in_.values.size(), Info{});
  producer_ = in_.Producers();
  for (const auto& [id, tensor] : in_.constants) info_[static_cast<size_t>(id)].side = Side::kFree;
  for (int v : user_rows) info_[static_cast<size_t>(v)].side = Side::kRows;
  for (auto [values, offsets] : user_ragged) {
    info_[static_cast<size_t>(values)].side = Side::kRaggedValues;
    info_[static_cast<size_t>(offsets)].side = Side::kRaggedOffsets;
  }
  request_index_ = out.AddValue({"rankd.request_index", DType::kI64, {-1}, true});
  out.inputs.push_back(request_index_);
  auto fail = [&](const std::string& why) {
    report.hoisted = false;
    report.why_not = why;
    return report;
  };
  for (const Node& n : in_.nodes) {
    bool candidate = false, user = false;
    for (int v : n.inputs) {
      Side s = SideOf(v);
      candidate = candidate || s == Side::kCandidate;
      user = user || (s != Side::kFree && s != Side::kCandidate);
    }
    std::optional<std::vector<Info>> sides;
    if (!candidate && !user) sides = std::vector<Info>(n.outputs.size(), Info{Side::kFree, {}});
    if (!candidate && user) sides = UserRule(n);
    if (sides) {
      for (size_t o = 0; o < n.outputs.size(); ++o) {
        if (n.outputs[o] >= 0) info_[static_cast<size_t>(n.outputs[o])] = (*sides)[o];
      }
      if (user) {
        ++report.user_nodes;
        if (!MovementOps().count(n.op) && (*sides)[0].side == Side::kRows) ++report.user_compute_nodes;
      }
      out.nodes.push_back(n);
      continue;
    }
    Node node = n;
    GroupUserConcatInputs(node);
    for (int& v : node.inputs) {
      if (v < 0 || v >= static_cast<int>(in_.values.size())) continue;  // already per candidate
      int twin = Twin(v);
      if (twin < 0) return fail(n.Describe() + " reads a user ragged input outside an embedding bag or padding");
      v = twin;
    }
    for (int o : node.outputs) {
      if (o >= 0) info_[static_cast<size_t>(o)].side = Side::kCandidate;
    }
    out.nodes.push_back(std::move(node));
  }
  for (int& o : out.outputs) {
    Side s = SideOf(o);
    if (s == Side::kFree || s == Side::kCandidate) continue;
    int twin = Twin(o);
    if (twin < 0) return fail("output '" + in_.values[static_cast<size_t>(o)].name + "' is a user ragged input");
    // The output keeps its name on its per-candidate form.
    std::string name = out.values[static_cast<size_t>(o)].name;
    out.RenameValue(o, name + ".per_user");
    out.RenameValue(twin, name);
    o = twin;
  }
  if (report.user_compute_nodes == 0) {
    return fail("nothing to hoist: the user inputs meet the candidates before any computation");
  }
  report.hoisted = true;
  report.gathered = gathered_;
  return report;
}

}  // namespace

HoistReport HoistUserSide(Graph& graph, const std::vector<int>& user_rows,
                          const std::vector<std::pair<int, int>>& user_ragged, const std::vector<PlanValue>& shapes,
                          int64_t plan_rows) {
  Graph hoisted;
  Hoister hoister(graph, shapes, plan_rows);
  HoistReport report = hoister.Run(user_rows, user_ragged, hoisted);
  if (report.hoisted) {
    graph = std::move(hoisted);
    RemoveDeadNodes(graph);
  }
  return report;
}

}  // namespace rankd
