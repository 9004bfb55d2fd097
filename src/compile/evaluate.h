// Running one node on the CPU backend outside any plan: constant folding at load time and at plan
// time (Shape chains, Reshape targets) go through here.
#pragma once

#include <vector>

#include "model/graph.h"
#include "model/ops/op_schema.h"
#include "rankd/status.h"
#include "rankd/tensor.h"

namespace rankd {

// Infers the node's outputs from `inputs` (nullptr for omitted ones), allocates them, and runs
// the CPU kernel. Inputs must hold data, except for Shape, which reads only the shape.
// Outputs larger than `max_output_bytes` are refused (ResourceExhausted) before allocation.
StatusOr<std::vector<Tensor>> EvaluateNode(const Node& node, const std::vector<const Tensor*>& inputs,
                                           const std::vector<int64_t>* ragged_max_lengths = nullptr,
                                           int64_t max_output_bytes = int64_t{1} << 30);

// Runs the node's shape function; errors are prefixed with the node.
Status InferNode(const OpSchema& schema, InferContext& ctx);

}  // namespace rankd
