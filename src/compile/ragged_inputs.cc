// Rewriting config-declared ragged inputs into (values, offsets) pairs.
#include <algorithm>
#include <map>
#include <set>

#include "compile/passes.h"

namespace rankd {

namespace {

// Flat ids `ids` and their bags' starts `starts` (graph inputs) as the pair (values, offsets): each
// EmbeddingBag over Concat(starts, [number of ids]) reads `offsets`, and its ids `values` where they
// are `ids`. Of the other readers of `ids`, a row Gather, a Shape (a weighted bag's id count), and padding_idx's Equal
// to a constant and Where over them read `values` (the same ids, and in a plan padded to a bucket the tail no bag
// reads); per-id values beside the ids (an FP32 input sharing their starts) are read as `values` by every reader.
// Nothing else may read either input.
Status ApplyBagStarts(Graph& graph, const std::string& name, int ids, int starts, int values, int offsets) {
  const std::vector<int> producers = graph.Producers();
  const bool per_id_values = graph.values[static_cast<size_t>(ids)].dtype == DType::kF32;
  for (Node& node : graph.nodes) {
    if (!per_id_values && node.op == "EmbeddingBag" && node.NumInputs() >= 3) {  // a weighted bag's weights: below
      const int concat = producers[static_cast<size_t>(node.inputs[2])];
      const Node* c = concat >= 0 ? &graph.nodes[static_cast<size_t>(concat)] : nullptr;
      if (c && c->op == "Concat" && c->NumInputs() == 2 && c->inputs[0] == starts) {
        node.inputs[2] = offsets;
        if (node.inputs[1] == ids) node.inputs[1] = values;
        continue;
      }
    }
    const bool row_gather = node.op == "Gather" && node.NumInputs() == 2 && node.inputs[1] == ids &&
                            node.inputs[0] != ids && node.GetInt("axis", 0) == 0;
    const bool shape = node.op == "Shape" && node.NumInputs() == 1;
    // padding_idx (model/dynamo_padding_bag_import.h): Where(Equal(ids, p), -1, ids), per id.
    const bool padding =
        (node.op == "Equal" && node.NumInputs() == 2 && node.inputs[0] == ids && graph.FindConstant(node.inputs[1])) ||
        (node.op == "Where" && node.NumInputs() == 3 && node.inputs[2] == ids && graph.FindConstant(node.inputs[1]) &&
         node.inputs[0] != ids);
    if (per_id_values || row_gather || shape || padding) {
      std::replace(node.inputs.begin(), node.inputs.end(), ids, values);
    }
  }
  RemoveDeadNodes(graph);
  for (const Node& node : graph.nodes) {
    for (int in : node.inputs) {
      if (in == ids || in == starts) {
        return InvalidArgument("ragged input '" + name + "' with offsets: " + node.Describe() +
                               " reads the ids or their starts other than as an embedding bag");
      }
    }
  }
  for (int out : graph.outputs) {
    if (out == ids || out == starts) return InvalidArgument("ragged input '" + name + "' is a model output");
  }
  return Status::Ok();
}

// Whether `v` is a constant holding the one value `x`.
bool IsScalar(const Graph& graph, int v, double x) { return graph.ScalarConstant(v) == x; }

// Whether `v` is the starts of the rows of padded ids, b * slots for b in [0, rows], as
// FuseSegmentBags writes them: Mul(Range(0, Gather(Shape(ids), 0) + 1, 1), Gather(Shape(ids), 1)).
bool PaddedRowStarts(const Graph& graph, const std::vector<int>& producers, int v, int ids) {
  auto producer = [&](int value, const char* op, int inputs) -> const Node* {
    const int p = value >= 0 ? producers[static_cast<size_t>(value)] : -1;
    const Node* n = p >= 0 ? &graph.nodes[static_cast<size_t>(p)] : nullptr;
    return n && n->op == op && n->NumInputs() == inputs ? n : nullptr;
  };
  auto dim_of_ids = [&](int value, int64_t dim) {
    const Node* gather = producer(value, "Gather", 2);
    const Node* shape = gather ? producer(gather->inputs[0], "Shape", 1) : nullptr;
    return shape && shape->inputs[0] == ids && IsScalar(graph, gather->inputs[1], dim);
  };
  const Node* mul = producer(v, "Mul", 2);
  const Node* range = mul ? producer(mul->inputs[0], "Range", 3) : nullptr;
  const Node* end = range ? producer(range->inputs[1], "Add", 2) : nullptr;
  return range && end && dim_of_ids(mul->inputs[1], 1) && IsScalar(graph, range->inputs[0], 0) &&
         IsScalar(graph, range->inputs[2], 1) && dim_of_ids(end->inputs[0], 0) && IsScalar(graph, end->inputs[1], 1);
}

// The graph input a weighted bag's weights (its input 3) are read from through the per-slot steps
// FuseSegmentBags writes (Reshape to [-1], Cast, Where(weights > 0, weights, 0)), or -1.
int WeightsSource(const Graph& graph, const std::vector<int>& producers, int v) {
  while (v >= 0) {
    const int p = producers[static_cast<size_t>(v)];
    if (p < 0) return std::find(graph.inputs.begin(), graph.inputs.end(), v) != graph.inputs.end() ? v : -1;
    const Node& n = graph.nodes[static_cast<size_t>(p)];
    if ((n.op == "Reshape" && n.NumInputs() == 2) || (n.op == "Cast" && n.NumInputs() == 1)) {
      v = n.inputs[0];
    } else if (n.op == "Where" && n.NumInputs() == 3 && graph.FindConstant(n.inputs[2])) {
      v = n.inputs[1];
    } else {
      return -1;
    }
  }
  return -1;
}

// Padded ids `ids` and their bags' weights, both ragged (TensorFlow's weighted lookups, which
// FuseSegmentBags makes EmbeddingBag(table, Reshape(ids, [-1]), b * slots, Reshape(weights, [-1]))):
// each such bag reads the pair (values, offsets) and keeps its weights, whose input becomes its own
// flat values in turn (ApplyPairedValues). Weights that are not a ragged input paired with the ids
// would no longer line up with them: refused. Returns whether a bag was rewritten.
StatusOr<bool> ApplyWeightedBagsOverPaddedIds(Graph& graph, const std::string& name, int ids, int values, int offsets,
                                              const std::set<std::string>& paired) {
  const std::vector<int> producers = graph.Producers();
  bool rewritten = false;
  for (Node& node : graph.nodes) {
    if (node.op != "EmbeddingBag" || node.NumInputs() != 4) continue;
    const int flat = producers[static_cast<size_t>(node.inputs[1])];
    const Node* reshape = flat >= 0 ? &graph.nodes[static_cast<size_t>(flat)] : nullptr;
    if (!reshape || reshape->op != "Reshape" || reshape->inputs[0] != ids ||
        !PaddedRowStarts(graph, producers, node.inputs[2], ids)) {
      continue;
    }
    const int weights = WeightsSource(graph, producers, node.inputs[3]);
    const std::string weights_name = weights >= 0 ? graph.values[static_cast<size_t>(weights)].name : "";
    if (!paired.count(weights_name)) {
      return InvalidArgument(
          "ragged input '" + name + "': " + node.Describe() + " weights its ids by " +
          (weights_name.empty() ? std::string("values computed in the graph") : "input '" + weights_name + "'") +
          ", which must be a ragged FP32 input paired_with '" + name + "' (docs/config.md)");
    }
    node.inputs[1] = values;
    node.inputs[2] = offsets;
    rewritten = true;
  }
  return rewritten;
}

// Padded values paired with ragged ids, now the pair (values, offsets): every reader, through the
// per-slot steps of WeightsSource, takes the flat values as the weights of a bag over those ids'
// values, which reads them slot for slot. Anything else reading them is refused.
Status ApplyPairedValues(Graph& graph, const std::string& name, int padded, int values, const std::string& ids_name) {
  const int ids_values = graph.FindValue(ids_name + ".values");
  std::set<int> flat = {values};  // the values and what the per-slot steps make of them
  if (std::find(graph.outputs.begin(), graph.outputs.end(), padded) != graph.outputs.end())
    return InvalidArgument("ragged input '" + name + "' is a model output");
  for (Node& node : graph.nodes) {
    std::replace(node.inputs.begin(), node.inputs.end(), padded, values);
    const bool reads = std::any_of(node.inputs.begin(), node.inputs.end(), [&](int in) { return flat.count(in); });
    if (!reads) continue;
    // Whether the node reads the flat values at input k and nowhere else (a Where's condition aside).
    const auto flat_only_at = [&](size_t k) {
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (i != k && flat.count(node.inputs[i]) && !(node.op == "Where" && i == 0)) return false;
      }
      return flat.count(node.inputs[k]) > 0;
    };
    bool per_slot = false;
    if (node.op == "Reshape" && node.NumInputs() == 2) {
      per_slot = flat_only_at(0) && IsScalar(graph, node.inputs[1], -1);
    } else if (node.op == "Cast" ||
               (node.op == "Greater" && node.NumInputs() == 2 && graph.FindConstant(node.inputs[1]))) {
      per_slot = flat_only_at(0);
    } else if (node.op == "Where" && node.NumInputs() == 3 && graph.FindConstant(node.inputs[2])) {
      per_slot = flat_only_at(1) && flat.count(node.inputs[0]);
    } else if (node.op == "EmbeddingBag" && node.NumInputs() == 4 && flat_only_at(3) && node.inputs[1] == ids_values) {
      continue;
    }
    if (!per_slot) {
      return InvalidArgument("ragged input '" + name + "' (paired_with '" + ids_name + "'): " + node.Describe() +
                             " reads its values other than as the weights of a bag over '" + ids_name + "'");
    }
    for (int out : node.outputs) {
      flat.insert(out);
      graph.values[static_cast<size_t>(out)].shape = {-1};
    }
  }
  for (int out : graph.outputs) {
    if (flat.count(out)) return InvalidArgument("ragged input '" + name + "' is a model output");
  }
  return Status::Ok();
}

}  // namespace

Status ApplyRaggedInputs(Graph& graph, const std::vector<std::string>& ragged_inputs,
                         const std::vector<std::string>& offsets_inputs, const std::vector<std::string>& paired_with) {
  // The values paired with each ids input (by the ids' name).
  std::map<std::string, std::set<std::string>> paired;
  for (size_t k = 0; k < paired_with.size() && k < ragged_inputs.size(); ++k) {
    if (!paired_with[k].empty()) paired[paired_with[k]].insert(ragged_inputs[k]);
  }
  std::set<int> taken_starts;  // the starts inputs ragged inputs have taken (several may share one)
  // Ids before per-id values (FP32: weights), whatever the config's order: the ids' rewrite takes
  // the bags' starts, which the values' leaves to them.
  std::vector<size_t> order(ragged_inputs.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_partition(order.begin(), order.end(), [&](size_t k) {
    const int value = graph.FindValue(ragged_inputs[k]);
    return value < 0 || graph.values[static_cast<size_t>(value)].dtype != DType::kF32;
  });
  for (size_t k : order) {
    const std::string& name = ragged_inputs[k];
    int ids = graph.FindValue(name);
    auto pos = std::find(graph.inputs.begin(), graph.inputs.end(), ids);
    if (ids < 0 || pos == graph.inputs.end())
      return InvalidArgument("ragged input '" + name + "' is not a model input");
    DType dtype = graph.values[static_cast<size_t>(ids)].dtype;
    int values = graph.AddValue({name + ".values", dtype, {-1}, true});
    int offsets = graph.AddValue({name + ".offsets", DType::kI64, {-1}, true});
    pos = std::find(graph.inputs.begin(), graph.inputs.end(), ids);
    *pos = offsets;
    graph.inputs.insert(pos, values);
    if (k < offsets_inputs.size() && !offsets_inputs[k].empty()) {
      const int starts = graph.FindValue(offsets_inputs[k]);
      auto at = std::find(graph.inputs.begin(), graph.inputs.end(), starts);
      const bool shared = starts >= 0 && taken_starts.count(starts) > 0;  // ids and their weights
      if (starts < 0 || (at == graph.inputs.end() && !shared))
        return InvalidArgument("offsets '" + offsets_inputs[k] + "' is not a model input");
      if (at != graph.inputs.end()) graph.inputs.erase(at);
      taken_starts.insert(starts);
      RANKD_RETURN_IF_ERROR(ApplyBagStarts(graph, name, ids, starts, values, offsets));
      continue;
    }
    if (k < paired_with.size() && !paired_with[k].empty()) {
      RANKD_RETURN_IF_ERROR(ApplyPairedValues(graph, name, ids, values, paired_with[k]));
      continue;
    }
    RANKD_ASSIGN_OR_RETURN(const bool weighted,
                           ApplyWeightedBagsOverPaddedIds(graph, name, ids, values, offsets, paired[name]));
    if (weighted) RemoveDeadNodes(graph);  // the padded form's reshape and starts
    bool padded_needed = std::find(graph.outputs.begin(), graph.outputs.end(), ids) != graph.outputs.end();
    for (Node& node : graph.nodes) {
      if (node.op == "EmbeddingBag" && node.NumInputs() == 2 && node.inputs[1] == ids) {
        node.inputs = {node.inputs[0], values, offsets};
        continue;
      }
      for (int in : node.inputs) padded_needed = padded_needed || in == ids;
    }
    if (padded_needed) {
      Node pad;
      pad.op = "RaggedToPadded";
      pad.name = name + ".padded";
      pad.inputs = {values, offsets};
      pad.outputs = {ids};
      pad.attrs["ragged_index"] = static_cast<int64_t>(k);
      graph.nodes.insert(graph.nodes.begin(), std::move(pad));
    }
  }
  return Status::Ok();
}

}  // namespace rankd
