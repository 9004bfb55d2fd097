// PyTorch's nn.EmbeddingBag with offsets, as torch.onnx's TorchScript exporter writes it: a Loop
// over the bags whose body gathers bag i's bounds from the offsets (with the id count appended),
// slices its ids, gathers their rows from a table and reduces them (ReduceSum or ReduceMean,
// keepdims 0) into the Loop's one scan output. The importer (onnx_import.cc) replaces such a Loop
// with one EmbeddingBag(table, ids, offsets) node of mode sum, mean or max (ReduceMax), a bag of no
// ids giving zeros as PyTorch's does. With per-sample weights (a sum bag whose body multiplies the
// rows by the same slice of a weights input, unsqueezed) the bag is EmbeddingBag(table, ids,
// offsets, weights), each row weighted as it is read. Any other Loop is refused naming the node
// and what differs. The dynamo exporter's form is dynamo_bag_import.h's.
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <optional>
#include <string>

#include "model/graph.h"
#include "rankd/status.h"

namespace rankd {

struct BagLoop {
  int table = -1, ids = -1, offsets = -1;  // values of `graph` (offsets: [bags + 1], the last the id count)
  int weights = -1;                        // per-sample weights, one per id (mode sum only), or -1
  std::string mode;                        // "sum", "mean" or "max"
  // The dynamo exporter's form (dynamo_bag_import.h): the Loop's first output is a sequence of the
  // bags' rows that a ConcatFromSequence stacks, its second the bag count; the bag writes the first
  // as the stacked rows and the ConcatFromSequence becomes an Identity.
  bool stacked = false;
  int stacked_output = 0;  // which of the Loop's outputs is the sequence (1 in the padding_idx form)
  // padding_idx (dynamo_padding_bag_import.h): ids equal to it are skipped, as negative ids are.
  std::optional<int64_t> padding;
};

// How the importer reads a tensor (its checks and external data).
using TensorFromProto = std::function<StatusOr<Tensor>(const onnx::TensorProto&)>;

// `loop` read against the nodes of `graph` imported before it; the body's constants read by `tensor_of`.
StatusOr<BagLoop> MatchBagLoop(const onnx::NodeProto& loop, const Graph& graph, const TensorFromProto& tensor_of);

// Turns `node` (the Loop's, named, outputs still to be added) into the bag's EmbeddingBag, adding
// to `graph` a Cast of its weights where they are not FP32 and padding_idx's nodes.
void ImportBagLoop(const BagLoop& bag, Node& node, Graph& graph);

}  // namespace rankd
