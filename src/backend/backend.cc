#include "backend/backend.h"

#include <algorithm>

#include "model/ops/op_schema.h"

namespace rankd {

int KernelCounters(const Graph& graph) {
  int count = 0;
  for (const Node& n : graph.nodes) {
    if (n.op != "KeyedRows") continue;
    for (int64_t c : n.GetInts("counters")) count = std::max(count, static_cast<int>(c) + 1);
  }
  return count;
}

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
