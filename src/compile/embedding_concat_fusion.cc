// Concat(parts, last axis) whose parts include embedding bags or column lookups read only there
// becomes one ConcatEmbeddingBags: every bag pooled and every lookup copied straight into its
// columns and the other parts copied into theirs, in one kernel (W1: 26 bag launches and a
// concatenation become one launch, and the 27 x 128-wide row is written once instead of twice;
// W4: 20 column selects, 20 table gathers and a concatenation become one; W2: a candidate's item
// and category lookups, Gather(table, ids [rows]), and their concatenation become one).

#include "compile/passes.h"

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
    for (Node& concat : graph_.nodes) {
      if (concat.op != "Concat" || concat.inputs.empty()) continue;
      int64_t axis = concat.GetInt("axis", 0);
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
    if (fused > 0) graph_.EraseNodes(removed_);
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

  bool AsBag(int value, Part& part) const {
    const Node* bag = SoleProducer(value);
    if (!bag || bag->op != "EmbeddingBag") return false;
    part = Part{bag->inputs, bag->GetString("mode", "sum") == "mean" ? 1 : 0, -1, {producers_[static_cast<size_t>(value)]}};
    return true;
  }

  // Gather(table, Gather(ids, c, axis=1)): table an FP32 constant [R, D], ids of declared rank 2,
  // c a constant scalar; the column select read only there.
  bool AsLookup(int value, Part& part) const {
    const Node* rows = SoleProducer(value);
    if (!rows || rows->op != "Gather" || rows->GetInt("axis", 0) != 0 || rows->inputs.size() != 2) return false;
    int table = rows->inputs[0];
    if (!graph_.IsConstant(table)) return false;
    const Tensor& t = graph_.constants.at(table);
    if (t.dtype() != DType::kF32 || t.rank() != 2) return false;
    const Node* select = SoleProducer(rows->inputs[1]);
    if (!select || select->op != "Gather" || select->GetInt("axis", 0) != 1 || select->inputs.size() != 2) return false;
    int ids = select->inputs[0], index = select->inputs[1];
    const Shape& ids_shape = graph_.values[static_cast<size_t>(ids)].shape;
    if (ids_shape.size() != 2 || !graph_.IsConstant(index)) return false;
    const Tensor& c = graph_.constants.at(index);
    if (c.rank() != 0 || (c.dtype() != DType::kI64 && c.dtype() != DType::kI32)) return false;
    int64_t column = c.ScalarAsInt(0);
    if (column < 0 && ids_shape[1] > 0) column += ids_shape[1];  // from the end: only of a known width
    if (column < 0 || (ids_shape[1] > 0 && column >= ids_shape[1])) return false;
    DType id_type = graph_.values[static_cast<size_t>(ids)].dtype;
    if (id_type != DType::kI64 && id_type != DType::kI32) return false;
    part = Part{{table, ids}, 0, column,
                {producers_[static_cast<size_t>(value)], producers_[static_cast<size_t>(rows->inputs[1])]}};
    return true;
  }

  // Gather(table, ids): table an FP32 constant [R, D], ids declared [rows]. The part reads column 0
  // of ids viewed as [rows, 1]: the Gather becomes that view, an Unsqueeze, which moves no data
  // (a part found always gets the Concat fused, so the Gather is rewritten at once).
  bool AsIdLookup(int value, Part& part) {
    const Node* found = SoleProducer(value);
    if (!found || found->op != "Gather" || found->GetInt("axis", 0) != 0 || found->inputs.size() != 2) return false;
    const int table = found->inputs[0], ids = found->inputs[1];
    if (!graph_.IsConstant(table)) return false;
    const Tensor& t = graph_.constants.at(table);
    if (t.dtype() != DType::kF32 || t.rank() != 2) return false;
    const DType id_type = graph_.values[static_cast<size_t>(ids)].dtype;
    const Shape id_shape = graph_.values[static_cast<size_t>(ids)].shape;
    if (!graph_.values[static_cast<size_t>(ids)].rank_known || id_shape.size() != 1 || (id_type != DType::kI64 && id_type != DType::kI32)) return false;
    Node& gather = graph_.nodes[static_cast<size_t>(producers_[static_cast<size_t>(value)])];
    const std::string name = gather.name + ".ids";
    const int column = graph_.AddValue({name, id_type, {id_shape[0], 1}, true});
    gather.op = "Unsqueeze";
    gather.inputs = {ids, graph_.AddConstant(name + ".axes", Tensor::FromVector<int64_t>(DType::kI64, {1}, {1}))};
    gather.outputs = {column};
    gather.attrs.clear();
    part = Part{{table, column}, 0, 0, {}};
    return true;
  }

  Graph& graph_;
  std::vector<int> producers_, uses_;
  std::vector<bool> removed_;
};

}  // namespace

int FuseEmbeddingConcats(Graph& graph) { return EmbeddingConcatFuser(graph).Run(); }

}  // namespace rankd
