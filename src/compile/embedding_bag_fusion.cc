// Recognising PyTorch's masked-gather embedding bag and replacing it with EmbeddingBag (its rows
// gathered from a table of FP32, or of BF16 or FP16 cast to FP32 after the gather, as a model whose
// trainer stored its tables in 16 bits exports them), and the bag's sum divided by its count (mean) or by the count's
// square root (sqrtn) with EmbeddingBag's mean and sqrtn combiners; and the masked max (the padded slots' rows filled
// with -inf, then the max over the bag) with EmbeddingBag's max, whose empty bag gives the fill.
#include <cmath>
#include <limits>
#include <optional>

#include "compile/passes.h"
#include "model/ops/bag_combiner.h"

namespace rankd {
namespace {

class Matcher {
 public:
  explicit Matcher(const Graph& g) : g_(g), producer_(g.Producers()) {}

  const Node* Producer(int value) const {
    if (value < 0) return nullptr;
    int p = producer_[static_cast<size_t>(value)];
    return p < 0 ? nullptr : &g_.nodes[static_cast<size_t>(p)];
  }

  std::vector<int64_t> Axes(const Node& n) const {
    if (n.HasInput(1) && g_.IsConstant(n.inputs[1])) {
      const Tensor& t = g_.constants.at(n.inputs[1]);
      std::vector<int64_t> v;
      for (int64_t i = 0; i < t.size(); ++i) v.push_back(t.ScalarAsInt(i));
      return v;
    }
    return n.GetInts("axes");
  }

  // The Gather whose rows `value` is: the Gather itself, or a Gather of a BF16 or FP16 table cast
  // to FP32 (the 16-bit table goes into the bag, which reads it as it is and sums in FP32).
  const Node* GatheredRows(int value) const {
    const Node* n = Producer(value);
    if (!n || n->op != "Cast") return n;
    if (n->GetInt("to", 0) != 1) return nullptr;
    const Node* gather = Producer(n->Input(0));
    if (!gather || gather->op != "Gather" || !g_.IsConstant(gather->Input(0))) return nullptr;
    const DType table = g_.constants.at(gather->Input(0)).dtype();
    return table == DType::kBF16 || table == DType::kF16 ? gather : nullptr;
  }

  // ids behind a clamp to >= 0: Clip(ids, 0[, max]), Max(ids, 0), Relu(ids), Where(mask, ids, 0).
  int UnclampedIds(int value) const {
    const Node* n = Producer(value);
    if (!n) return -1;
    if (n->op == "Clip" && n->HasInput(1) && g_.ScalarConstant(n->Input(1)) == 0.0 && !n->HasInput(2))
      return n->Input(0);
    if (n->op == "Max" && n->NumInputs() == 2 && g_.ScalarConstant(n->Input(1)) == 0.0) return n->Input(0);
    if (n->op == "Relu") return n->Input(0);
    if (n->op == "Where" && g_.ScalarConstant(n->Input(2)) == 0.0) return n->Input(1);
    return -1;
  }

  // The producer of `value` past Cast and Unsqueeze(-1 or 2), noting an Unsqueeze; nullptr where
  // an Unsqueeze is of another axis.
  const Node* PastCastAndUnsqueeze(int value, bool& unsqueezed) const {
    const Node* n = Producer(value);
    while (n && (n->op == "Cast" || n->op == "Unsqueeze")) {
      if (n->op == "Unsqueeze") {
        std::vector<int64_t> axes = Axes(*n);
        if (axes.size() != 1 || (axes[0] != -1 && axes[0] != 2)) return nullptr;
        unsqueezed = true;
      }
      n = Producer(n->Input(0));
    }
    return n;
  }

  // The ids `n` compares: "ids >= 0" (GreaterOrEqual(ids, 0), Greater(ids, -1)) when `valid`,
  // "ids < 0" (Less(ids, 0), Equal(ids, -1)) when not, or Not of the other; -1 if it is neither.
  int ComparedIds(const Node* n, bool valid) const {
    if (!n) return -1;
    if (n->op == "Not") return ComparedIds(Producer(n->Input(0)), !valid);
    const char* zero_op = valid ? "GreaterOrEqual" : "Less";
    const char* minus_one_op = valid ? "Greater" : "Equal";
    if (n->op == zero_op && g_.ScalarConstant(n->Input(1)) == 0.0) return n->Input(0);
    if (n->op == minus_one_op && g_.ScalarConstant(n->Input(1)) == -1.0) return n->Input(0);
    return -1;
  }

  // The ids whose ">= 0" this value is, through Cast and Unsqueeze(-1 or 2); -1 if it is not.
  int MaskedIds(int value, bool& unsqueezed) const {
    return ComparedIds(PastCastAndUnsqueeze(value, unsqueezed), true);
  }

  // The ids whose "< 0" this value is (the slots a masked max fills), as MaskedIds reads ">= 0".
  int PaddedSlots(int value, bool& unsqueezed) const {
    return ComparedIds(PastCastAndUnsqueeze(value, unsqueezed), false);
  }

  // A fill below every row's value: -inf, or the lowest float (PyTorch's torch.finfo(float).min).
  // A larger one (-1e9, say) is not: a row could hold less, and the max would differ.
  std::optional<float> LowestFill(int value) const {
    const std::optional<double> fill = g_.ScalarConstant(value);
    if (!fill || !(*fill <= -static_cast<double>(std::numeric_limits<float>::max()))) return std::nullopt;
    return std::isinf(*fill) ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::lowest();
  }

  // Whether `value` is how many of `ids`'s entries are >= 0 per bag, at least 1, as [bags, 1]:
  // Clip(c, 1) or Max(c, 1) of c = [Cast](ReduceSum(mask of ids, axes=[1])), the mask [bags, n]
  // with keepdims, or unsqueezed to [bags, n, 1] without.
  bool IsBagCount(int value, int ids) const {
    const Node* n = Producer(value);
    if (!n) return false;
    int count = -1;
    if (n->op == "Clip" && n->HasInput(1) && g_.ScalarConstant(n->Input(1)) == 1.0 && !n->HasInput(2)) {
      count = n->Input(0);
    } else if (n->op == "Max" && n->NumInputs() == 2 && g_.ScalarConstant(n->Input(1)) == 1.0) {
      count = n->Input(0);
    } else {
      return false;
    }
    const Node* sum = Producer(count);
    while (sum && sum->op == "Cast") sum = Producer(sum->Input(0));
    if (!sum || sum->op != "ReduceSum" || sum->NumInputs() < 1 || Axes(*sum) != std::vector<int64_t>{1}) return false;
    bool unsqueezed = false;
    if (MaskedIds(sum->Input(0), unsqueezed) != ids) return false;
    return unsqueezed == (sum->GetInt("keepdims", 1) == 0);
  }

 private:
  const Graph& g_;
  std::vector<int> producer_;
};

}  // namespace

int FuseMaskedEmbeddingBags(Graph& graph) {
  Matcher m(graph);
  int fused = 0;
  for (Node& node : graph.nodes) {
    if (node.op != "ReduceSum" || node.GetInt("keepdims", 1) != 0) continue;
    if (m.Axes(node) != std::vector<int64_t>{1}) continue;
    const Node* mul = m.Producer(node.Input(0));
    if (!mul || mul->op != "Mul") continue;
    for (int side = 0; side < 2; ++side) {
      const Node* gather = m.GatheredRows(mul->Input(side));
      if (!gather || gather->op != "Gather" || gather->GetInt("axis", 0) != 0) continue;
      int table = gather->Input(0);
      if (!graph.IsConstant(table) || graph.constants.at(table).rank() != 2) continue;
      int ids = m.UnclampedIds(gather->Input(1));
      bool unsqueezed = false;
      int masked = m.MaskedIds(mul->Input(1 - side), unsqueezed);
      if (ids < 0 || ids != masked || !unsqueezed) continue;
      node.op = "EmbeddingBag";
      node.inputs = {table, ids};
      node.attrs.clear();
      node.attrs["mode"] = std::string("sum");
      ++fused;
      break;
    }
  }
  // The masked max: ReduceMax over the bag of Where(valid, rows, fill) or Where(padded, fill, rows),
  // the mask unsqueezed over the rows' width.
  for (Node& node : graph.nodes) {
    if (node.op != "ReduceMax" || node.GetInt("keepdims", 1) != 0 || m.Axes(node) != std::vector<int64_t>{1}) continue;
    const Node* where = m.Producer(node.Input(0));
    if (!where || where->op != "Where" || where->NumInputs() != 3) continue;
    for (int side = 1; side <= 2; ++side) {
      const Node* gather = m.GatheredRows(where->Input(side));
      if (!gather || gather->op != "Gather" || gather->GetInt("axis", 0) != 0) continue;
      const int table = gather->Input(0);
      if (!graph.IsConstant(table) || graph.constants.at(table).rank() != 2) continue;
      const int ids = m.UnclampedIds(gather->Input(1));
      const std::optional<float> fill = m.LowestFill(where->Input(3 - side));
      bool unsqueezed = false;
      const int masked =
          side == 1 ? m.MaskedIds(where->Input(0), unsqueezed) : m.PaddedSlots(where->Input(0), unsqueezed);
      if (ids < 0 || ids != masked || !unsqueezed || !fill) continue;
      node.op = "EmbeddingBag";
      node.inputs = {table, ids};
      node.attrs.clear();
      node.attrs["mode"] = std::string("max");
      node.attrs["empty"] = *fill;
      ++fused;
      break;
    }
  }
  // sum / count -> mean, sum / sqrt(count) -> sqrtn (TensorFlow's combiners, as PyTorch code spells them).
  for (Node& div : graph.nodes) {
    if (div.op != "Div" || div.NumInputs() != 2) continue;
    const Node* bag = m.Producer(div.Input(0));
    if (!bag || bag->op != "EmbeddingBag" || bag->GetString("mode", "sum") != "sum" || bag->NumInputs() != 2) continue;
    int divisor = div.Input(1);
    BagCombiner combiner = kBagMean;
    if (const Node* root = m.Producer(divisor); root && root->op == "Sqrt") {
      divisor = root->Input(0);
      combiner = kBagSqrtN;
    }
    if (!m.IsBagCount(divisor, bag->Input(1))) continue;
    div.op = "EmbeddingBag";
    div.inputs = bag->inputs;
    div.attrs.clear();
    div.attrs["mode"] = std::string(BagCombinerName(combiner));
    ++fused;
  }
  if (fused) RemoveDeadNodes(graph);
  return fused;
}

}  // namespace rankd
