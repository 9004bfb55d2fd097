// Concat(parts, last axis) whose parts include embedding bags or column lookups read only there
// becomes one ConcatEmbeddingBags: every bag pooled and every lookup copied straight into its
// columns and the other parts copied into theirs, in one kernel (W1: 26 bag launches and a
// concatenation become one launch, and the 27 x 128-wide row is written once instead of twice;
// W4: 20 column selects, 20 table gathers and a concatenation become one; W2: a candidate's item
// and category lookups, Gather(table, ids [rows]), and their concatenation become one).
// A Concat along the last axis of sequence lookups only, Gather(table, ids [users, L]) with its
// ids perhaps clipped below, Clip(ids, floor), becomes one ConcatEmbeddingBags over the ids viewed
// as [users * L, 1] (the floor kept as the part's), its result viewed back as [users, L, width]
// (W2: the user's sequence clipped twice, looked up in two tables and concatenated, five launches,
// become one).

#include <limits>

#include "compile/passes.h"
#include "model/ops/bag_combiner.h"

namespace rankd {
namespace {

// A part of the fused node: its inputs and attributes.
struct Part {
  std::vector<int> inputs;
  int64_t mode = 0;
  int64_t column = -1;
  std::vector<int> producers;  // the nodes it replaces
};

class EmbeddingConcatFuser {
 public:
  explicit EmbeddingConcatFuser(Graph& graph)
      : graph_(graph), producers_(graph.Producers()), uses_(graph.UseCounts()), removed_(graph.nodes.size(), false) {}

  int Run() {
    int fused = 0;
    after_.assign(graph_.nodes.size(), {});
    for (size_t index = 0; index < graph_.nodes.size(); ++index) {
      Node& concat = graph_.nodes[index];
      if (concat.op != "Concat" || concat.inputs.empty()) continue;
      int64_t axis = concat.GetInt("axis", 0);
      if ((axis == 2 || axis == -1) && FuseSequenceLookups(concat, index)) {
        ++fused;
        continue;
      }
      if (axis != 1 && axis != -1) continue;  // bags and lookups are [rows, dim]: only their last axis
      std::vector<Part> parts;
      bool any = false;
      for (int value : concat.inputs) {
        // A value read twice, even by this Concat alone, is not a sole producer's: it stays as it
        // is, copied.
        Part p;
        if (AsBag(value, p) || AsLookup(value, p) || AsIdLookup(value, p)) {
          any = true;
        } else {
          p = Part{{value}, 0, -1, {}};
        }
        parts.push_back(std::move(p));
      }
      // A bag or an FP32 lookup among the parts makes every part FP32 and rank 2 (Concat requires
      // it of all).
      if (!any) continue;
      std::vector<int> inputs;
      std::vector<int64_t> counts, modes, columns;
      bool lookups = false;
      for (const Part& p : parts) {
        inputs.insert(inputs.end(), p.inputs.begin(), p.inputs.end());
        counts.push_back(static_cast<int64_t>(p.inputs.size()));
        modes.push_back(p.mode);
        columns.push_back(p.column);
        lookups = lookups || p.column >= 0;
        for (int n : p.producers) removed_[static_cast<size_t>(n)] = true;
      }
      concat.op = "ConcatEmbeddingBags";
      concat.inputs = std::move(inputs);
      concat.attrs = {{"parts", counts}, {"modes", modes}};
      if (lookups) concat.attrs["columns"] = columns;
      ++fused;
    }
    if (fused > 0) {  // the nodes kept, each followed by those added after it
      std::vector<Node> nodes;
      for (size_t n = 0; n < graph_.nodes.size(); ++n) {
        if (!removed_[n]) nodes.push_back(std::move(graph_.nodes[n]));
        for (Node& added : after_[n]) nodes.push_back(std::move(added));
      }
      graph_.nodes = std::move(nodes);
    }
    return fused;
  }

 private:
  // The node producing `value` when it is read only once (by the Concat) and not yet taken.
  const Node* SoleProducer(int value) const {
    // (Values added by AsIdLookup, past producers_, are never parts.)
    int p = value < 0 || static_cast<size_t>(value) >= producers_.size() ? -1 : producers_[static_cast<size_t>(value)];
    if (p < 0 || removed_[static_cast<size_t>(p)] || uses_[static_cast<size_t>(value)] != 1) return nullptr;
    const Node& n = graph_.nodes[static_cast<size_t>(p)];
    return n.outputs.size() == 1 ? &n : nullptr;
  }

  // The sole producer of `value` when it is Gather(table, ids) on axis 0 with table an FP32
  // constant [R, D]: a lookup every rule below starts from.
  const Node* TableGather(int value) const {
    const Node* gather = SoleProducer(value);
    if (!gather || gather->op != "Gather" || gather->GetInt("axis", 0) != 0 || gather->inputs.size() != 2)
      return nullptr;
    const Tensor* t = graph_.FindConstant(gather->inputs[0]);
    return t && t->dtype() == DType::kF32 && t->rank() == 2 ? gather : nullptr;
  }

  // Whether `value` is INT64 or INT32 ids of declared rank `rank`.
  bool Ids(int value, size_t rank) const {
    const Value& v = graph_.values[static_cast<size_t>(value)];
    return v.rank_known && v.shape.size() == rank && (v.dtype == DType::kI64 || v.dtype == DType::kI32);
  }

  bool AsBag(int value, Part& part) const {
    const Node* bag = SoleProducer(value);
    // A max bag, and a weighted one other than a sum, run alone (EmbeddingBag).
    const std::string mode = bag ? bag->GetString("mode", "sum") : "";
    if (!bag || bag->op != "EmbeddingBag" || mode == "max" || (bag->NumInputs() == 4 && mode != "sum")) return false;
    part = Part{bag->inputs,
                BagCombinerFromName(bag->GetString("mode", "sum")).value_or(kBagSum),
                -1,
                {producers_[static_cast<size_t>(value)]}};
    return true;
  }

  // Gather(table, Gather(ids, c, axis=1)): table an FP32 constant [R, D], ids of declared rank 2,
  // c a constant scalar; the column select read only there.
  bool AsLookup(int value, Part& part) const {
    const Node* rows = TableGather(value);
    if (!rows) return false;
    const int table = rows->inputs[0];
    const Node* select = SoleProducer(rows->inputs[1]);
    if (!select || select->op != "Gather" || select->GetInt("axis", 0) != 1 || select->inputs.size() != 2) return false;
    int ids = select->inputs[0], index = select->inputs[1];
    if (!Ids(ids, 2) || !graph_.IsConstant(index)) return false;
    const Shape& ids_shape = graph_.values[static_cast<size_t>(ids)].shape;
    const Tensor& c = graph_.constants.at(index);
    if (c.rank() != 0 || (c.dtype() != DType::kI64 && c.dtype() != DType::kI32)) return false;
    int64_t column = c.ScalarAsInt(0);
    if (column < 0 && ids_shape[1] > 0) column += ids_shape[1];  // from the end: only of a known width
    if (column < 0 || (ids_shape[1] > 0 && column >= ids_shape[1])) return false;
    part = Part{{table, ids},
                0,
                column,
                {producers_[static_cast<size_t>(value)], producers_[static_cast<size_t>(rows->inputs[1])]}};
    return true;
  }

  // Gather(table, ids): table an FP32 constant [R, D], ids declared [rows]. The part reads column 0
  // of ids viewed as [rows, 1]: the Gather becomes that view, an Unsqueeze, which moves no data
  // (a part found always gets the Concat fused, so the Gather is rewritten at once).
  bool AsIdLookup(int value, Part& part) {
    const Node* found = TableGather(value);
    if (!found || !Ids(found->inputs[1], 1)) return false;
    const int table = found->inputs[0], ids = found->inputs[1];
    const DType id_type = graph_.values[static_cast<size_t>(ids)].dtype;
    const int64_t rows = graph_.values[static_cast<size_t>(ids)].shape[0];
    Node& gather = graph_.nodes[static_cast<size_t>(producers_[static_cast<size_t>(value)])];
    const std::string name = gather.name + ".ids";
    const int column = graph_.AddValue({name, id_type, {rows, 1}, true});
    gather.op = "Unsqueeze";
    gather.inputs = {ids, graph_.AddConstant(name + ".axes", Tensor::FromVector<int64_t>(DType::kI64, {1}, {1}))};
    gather.outputs = {column};
    gather.attrs.clear();
    part = Part{{table, column}, 0, 0, {}};
    return true;
  }

  // Concat(Gather(table, ids [users, L]) ..., axis 2 or -1): every part such a lookup (tables FP32
  // constants [R, D], ids of declared rank 2, so axis 2 is the last), its ids perhaps Clip(x, floor) with a constant
  // scalar floor and no ceiling, read only there. Each Gather becomes the view of its ids (x for
  // a clipped one) as [users * L, 1]; the Concat a ConcatEmbeddingBags of one-column lookups with
  // the floors, into [users * L, width]; after it, that result viewed as [users, L, width] through
  // Reshape(·, Concat(Shape(first ids), [width])), which plans fold and which moves no data.
  bool FuseSequenceLookups(Node& concat, size_t index) {
    struct Lookup {
      int gather = -1, clip = -1, table = -1, ids = -1;
      int64_t floor = std::numeric_limits<int64_t>::min();
    };
    std::vector<Lookup> lookups;
    int64_t width = 0;
    for (int value : concat.inputs) {
      const Node* gather = TableGather(value);
      if (!gather) return false;
      Lookup l{producers_[static_cast<size_t>(value)], -1, gather->inputs[0], gather->inputs[1]};
      width += graph_.constants.at(l.table).dim(1);
      const Node* clip = SoleProducer(l.ids);
      if (clip && clip->op == "Clip" && clip->attrs.empty() && clip->inputs.size() >= 2 && clip->inputs[1] >= 0 &&
          (clip->inputs.size() < 3 || clip->inputs[2] < 0) && graph_.IsConstant(clip->inputs[1])) {
        const Tensor& floor = graph_.constants.at(clip->inputs[1]);
        if (floor.rank() == 0 && (floor.dtype() == DType::kI64 || floor.dtype() == DType::kI32)) {
          l.clip = producers_[static_cast<size_t>(l.ids)];
          l.floor = floor.ScalarAsInt(0);
          l.ids = clip->inputs[0];
        }
      }
      if (!Ids(l.ids, 2)) return false;
      lookups.push_back(l);
    }
    std::vector<int> inputs;
    std::vector<int64_t> counts, modes, columns, floors;
    for (const Lookup& l : lookups) {
      Node& gather = graph_.nodes[static_cast<size_t>(l.gather)];
      const std::string name = gather.name + ".ids";
      const int flat = graph_.AddValue({name, graph_.values[static_cast<size_t>(l.ids)].dtype, {-1, 1}, true});
      gather.op = "Reshape";
      gather.inputs = {l.ids,
                       graph_.AddConstant(name + ".shape", Tensor::FromVector<int64_t>(DType::kI64, {2}, {-1, 1}))};
      gather.outputs = {flat};
      gather.attrs.clear();
      if (l.clip >= 0) removed_[static_cast<size_t>(l.clip)] = true;
      inputs.insert(inputs.end(), {l.table, flat});
      counts.push_back(2);
      modes.push_back(0);
      columns.push_back(0);
      floors.push_back(l.floor);
    }
    const int out = concat.outputs[0];
    const std::string name = concat.name;
    const int rows =
        graph_.AddValue({graph_.values[static_cast<size_t>(out)].name + ".rows", DType::kF32, {-1, width}, true});
    concat.op = "ConcatEmbeddingBags";
    concat.inputs = std::move(inputs);
    concat.outputs = {rows};
    concat.attrs = {{"parts", counts}, {"modes", modes}, {"columns", columns}, {"floors", floors}};
    const int shape = graph_.AddValue({name + ".shape", DType::kI64, {2}, true});
    const int target = graph_.AddValue({name + ".target", DType::kI64, {3}, true});
    const int tail = graph_.AddConstant(name + ".width", Tensor::FromVector<int64_t>(DType::kI64, {1}, {width}));
    after_[index].push_back(Node{"Shape", name + ".shape", {lookups[0].ids}, {shape}, {}});
    after_[index].push_back(Node{"Concat", name + ".target", {shape, tail}, {target}, {{"axis", int64_t{0}}}});
    // allowzero: an empty sequence's length 0 is a length, not "the input's dim".
    after_[index].push_back(Node{"Reshape", name + ".view", {rows, target}, {out}, {{"allowzero", int64_t{1}}}});
    return true;
  }

  Graph& graph_;
  std::vector<int> producers_, uses_;
  std::vector<bool> removed_;
  std::vector<std::vector<Node>> after_;  // per node: nodes added right after it
};

}  // namespace

int FuseEmbeddingConcats(Graph& graph) { return EmbeddingConcatFuser(graph).Run(); }

}  // namespace rankd
