// Rewriting config-declared ragged inputs into (values, offsets) pairs.
#include <algorithm>
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

}  // namespace

Status ApplyRaggedInputs(Graph& graph, const std::vector<std::string>& ragged_inputs,
                         const std::vector<std::string>& offsets_inputs) {
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
