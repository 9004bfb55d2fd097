#include "backend/backend.h"

#include "compile/ops/op_schema.h"

namespace rankd {

Status Backend::CheckGraph(const Graph& graph) const {
  for (const Node& node : graph.nodes) {
    const OpSchema* schema = FindOpSchema(node.op);
    if (!schema || !FindKernel(node.op)) {
      return Unimplemented(node.Describe() + ": op " + node.op + " is not supported by the " +
                           name() + " backend");
    }
    if (node.NumInputs() < schema->min_inputs || node.NumInputs() > schema->max_inputs) {
      return InvalidArgument(node.Describe() + " has " + std::to_string(node.NumInputs()) +
                             " inputs; it takes " + std::to_string(schema->min_inputs) + " to " +
                             std::to_string(schema->max_inputs));
    }
    for (int i = 0; i < schema->min_inputs; ++i) {
      if (!node.HasInput(i)) {
        return InvalidArgument(node.Describe() + ": required input " + std::to_string(i) + " is missing");
      }
    }
    if (node.outputs.empty() || node.outputs[0] < 0) {
      return InvalidArgument(node.Describe() + " has no output");
    }
    if (schema->check) RETURN_IF_ERROR(schema->check(node));
  }
  return Status::Ok();
}

}  // namespace rankd
