// OpSchema: what rankd knows about an op independently of any backend.
//
// For each supported op: a load-time check of its attributes (before shapes are known) and a
// shape function that, given concrete input shapes (and the values of inputs known at plan time,
// such as the target of a Reshape), gives the output dtypes and shapes and the scratch memory a
// kernel needs. Backends implement kernels for the same op names (backend/backend.h).
#pragma once

#include <string>
#include <vector>

#include "model/graph.h"
#include "rankd/status.h"
#include "rankd/tensor.h"

namespace rankd {

// An input or output during planning: concrete dtype and shape, and the value when known.
struct TensorMeta {
  DType dtype = DType::kInvalid;  // kInvalid for an omitted optional input
  Shape shape;
  const Tensor* value = nullptr;  // set for constants and values folded at plan time
  bool present() const { return dtype != DType::kInvalid; }
};

struct InferContext {
  const Node& node;
  std::vector<TensorMeta> inputs;   // one per node input
  std::vector<TensorMeta> outputs;  // filled by the shape function, one per node output
  int64_t scratch_bytes = 0;        // set by ops whose kernels need workspace scratch
  // Padded lengths of ragged inputs for this plan, indexed by RaggedToPadded's `ragged_index`.
  const std::vector<int64_t>* ragged_max_lengths = nullptr;

  const TensorMeta& in(int i) const { return inputs[static_cast<size_t>(i)]; }
  TensorMeta& out(int i) { return outputs[static_cast<size_t>(i)]; }
  // Error helper: "Op 'name': message".
  Status Error(const std::string& message) const { return InvalidArgument(node.Describe() + ": " + message); }
  // The value of input i as int64s. REQUIRES: in(i).value != nullptr.
  std::vector<int64_t> IntValues(int i) const;
};

struct OpSchema {
  const char* name;
  int min_inputs;
  int max_inputs;
  // Load-time attribute check; may be null.
  Status (*check)(const Node&);
  Status (*infer)(InferContext&);
  // True when output 0 is input 0's buffer with a new shape (Reshape, Squeeze, ...).
  bool aliases_input = false;
  // When set: whether output 0 is input 0's elements in their order at the dtypes and shapes just
  // inferred (a Cast to the dtype it has, a Transpose moving only dims of 1, an Expand or Tile
  // repeating nothing, a Concat of one part). The plan then makes it an alias, as aliases_input.
  bool (*moves_no_data)(const InferContext&) = nullptr;
};

// The schema for an op, or nullptr when rankd does not know it.
const OpSchema* FindOpSchema(const std::string& op);
// Every known op name, sorted.
std::vector<std::string> KnownOps();
// OK when `node` has the schema's number of inputs, each required one present, and an output 0;
// else InvalidArgument naming the node. Every shape function may assume it.
Status CheckArity(const OpSchema& schema, const Node& node);

// Registration hooks, one per op family file.
void AppendElementwiseSchemas(std::vector<OpSchema>& out);
void AppendTensorSchemas(std::vector<OpSchema>& out);
void AppendMathSchemas(std::vector<OpSchema>& out);
void AppendEmbeddingSchemas(std::vector<OpSchema>& out);
void AppendAttentionSchemas(std::vector<OpSchema>& out);
void AppendStringSchemas(std::vector<OpSchema>& out);

// Helpers shared by shape functions.
// Normalises axis into [0, rank); error if out of range.
StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, const Node& node);
// Numpy-style broadcast of shapes; error names the node.
StatusOr<Shape> BroadcastShapes(const std::vector<Shape>& shapes, const Node& node);

}  // namespace rankd
