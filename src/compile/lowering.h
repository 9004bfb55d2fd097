// What the passes that write new nodes share (split_lowering.cc, gelu_lowering.cc,
// sibling_products.cc).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "model/graph.h"
#include "rankd/status.h"

namespace rankd {

// Replaces each node of `op` in `graph` by the nodes `lower(node, out)` appends to `out`, where
// the node stood, so the graph stays topological. Returns how many were lowered, or the first
// error of `lower` (the graph is then unusable: the model does not load).
template <typename Lower>
StatusOr<int> LowerEach(Graph& graph, const std::string& op, Lower&& lower) {
  std::vector<Node> out;
  int lowered = 0;
  for (Node& node : graph.nodes) {
    if (node.op != op) {
      out.push_back(std::move(node));
      continue;
    }
    RANKD_RETURN_IF_ERROR(lower(static_cast<const Node&>(node), out));
    ++lowered;
  }
  graph.nodes = std::move(out);
  return lowered;
}

// A constant INT64 vector `values` named `name` in `graph` (a Slice's starts, ends or axes);
// returns its value id.
inline int AddInt64s(Graph& graph, const std::string& name, const std::vector<int64_t>& values) {
  return graph.AddConstant(name,
                           Tensor::FromVector<int64_t>(DType::kI64, {static_cast<int64_t>(values.size())}, values));
}

}  // namespace rankd
