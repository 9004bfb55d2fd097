#include "backend/backend.h"

#include "model/ops/op_schema.h"

namespace rankd {

Status Backend::CheckGraph(const Graph& graph) const {
  for (const Node& node : graph.nodes) {
    const OpSchema* schema = FindOpSchema(node.op);
    if (!schema || !FindKernel(node.op)) {
      return Unimplemented(node.Describe() + ": op " + node.op + " is not supported by the " + name() + " backend");
    }
    RANKD_RETURN_IF_ERROR(CheckArity(*schema, node));
    if (schema->check) RANKD_RETURN_IF_ERROR(schema->check(node));
  }
  return Status::Ok();
}

}  // namespace rankd
