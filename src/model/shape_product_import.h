// A ReduceProd over a Shape (every axis, keepdims 0): a tensor's element count as PyTorch's
// exporters write it. nn.EmbeddingBag's padded 2-D form (ids [bags, n], no offsets) computes its
// bags' starts as Range(0, ReduceProd(Shape(ids)), n). The importer (onnx_import.cc) writes that
// count as the product of the shape's entries (Gather and Mul: ops every backend runs), so the
// form loads and its Loop becomes one EmbeddingBag (bag_loop_import.h). Any other ReduceProd is
// left as it is, and the op check refuses it by name.
#pragma once

#include "model/graph.h"

namespace rankd {

// When `node` (a ReduceProd whose inputs are resolved, not yet added) reads a Shape of a value of
// known rank of at least 1, over all of it with keepdims 0: adds the Gathers of the shape's entries
// and the products before the last to `graph`, turns `node` into the last (its outputs still to be
// added) and returns true. Otherwise changes nothing and returns false.
bool ImportShapeProduct(Node& node, Graph& graph);

}  // namespace rankd
