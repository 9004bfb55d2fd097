// Rewriting config-declared ragged inputs into (values, offsets) pairs.
#include <algorithm>

#include "compile/passes.h"

namespace rankd {

Status ApplyRaggedInputs(Graph& graph, const std::vector<std::string>& ragged_inputs) {
  for (size_t k = 0; k < ragged_inputs.size(); ++k) {
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
