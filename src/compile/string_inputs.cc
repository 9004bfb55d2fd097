// BYTES inputs whose strings the model's backend hashes (docs/strings.md, "On the device").
#include <algorithm>

#include "compile/passes.h"
#include "model/ops/hash_strings.h"

namespace rankd {

StatusOr<int> HashStringsInGraph(Graph& graph, const std::vector<InputConfig>& inputs) {
  int rewritten = 0;
  for (const InputConfig& in : inputs) {
    if (!in.HashedByBackend()) continue;
    const int ids = graph.FindValue(in.name);
    auto pos = std::find(graph.inputs.begin(), graph.inputs.end(), ids);
    if (ids < 0 || pos == graph.inputs.end())
      return InvalidArgument("BYTES input '" + in.name + "' is not a model input");
    const Value before = graph.values[static_cast<size_t>(ids)];
    if (before.dtype != DType::kI64 && before.dtype != DType::kI32) {
      return InvalidArgument("BYTES input '" + in.name +
                             "' is hashed to ids: the model's input must be INT64 or INT32");
    }
    Shape shape{-1};
    shape.insert(shape.end(), in.dims.begin(), in.dims.end());
    shape.push_back(hash_strings::kRecordWidth);
    graph.RenameValue(ids, in.name + ".ids");
    const int records = graph.AddValue({in.name, DType::kI64, shape, true});
    *std::find(graph.inputs.begin(), graph.inputs.end(), ids) = records;
    Node hash;
    hash.op = "HashStrings";
    hash.name = in.name + ".hash";
    hash.inputs = {records};
    hash.outputs = {ids};
    hash.attrs["function"] = std::string(StringHashName(*in.strings.hash));
    hash.attrs["seed"] = static_cast<int64_t>(in.strings.seed);
    hash.attrs["buckets"] = in.strings.buckets;
    hash.attrs["dtype"] = std::string(DTypeName(before.dtype));
    graph.nodes.insert(graph.nodes.begin(), std::move(hash));
    ++rewritten;
  }
  return rewritten;
}

}  // namespace rankd
