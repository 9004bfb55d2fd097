// PyTorch's nn.EmbeddingBag with offsets as torch.onnx's dynamo exporter writes it (onnxscript's
// aten_embedding_bag, the default exporter since PyTorch 2.9). Before the Loop:
//
//   rows    = Mul(Gather(table, Reshape(ids, [-1])), Unsqueeze(weights, [1]))
//             (weights: Expand(1, Shape(ids)) without per-sample weights)
//   bounds  = Concat(offsets, Shape(Reshape(ids, [-1])))
//   Loop(cond Less(0, Size(offsets)), carrying SequenceEmpty() and the bag index i = 0, in either
//        order: over padded ids with per-sample weights the exporter carries the index first)
//
// and in its body bag i's start and end are Slice(bounds, [i], [i + 1]) and Slice(bounds, [i + 1],
// [i + 2]); If(start == end) inserts a row of zeros, else the rows' Slice(rows, start, end) reduced
// over axis 0 (keepdims 1): ReduceSum; a mean as ReduceMean, the last bag's as ReduceSum divided by
// the ids after its start; a max as ReduceMax, the last bag's slice running to the id count. The
// row goes into the sequence (SequenceInsert), i + 1, and the loop runs while i < Size(offsets).
// After the Loop, ConcatFromSequence(axis 0) stacks the rows. With include_last_offset (a sum) the
// bounds are the offsets themselves and the loop runs while i < Size(offsets) - 1; padded 2-D ids
// come flattened, their offsets a Range over them.
//
// That is EmbeddingBag(table, ids, bounds) of mode sum, mean or max (a sum weighted by an input's
// per-sample weights), as the TorchScript form (bag_loop_import.h) gives it; the importer takes the
// Loop's sequence as the bag's output and the ConcatFromSequence as an Identity.
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>

#include "model/bag_loop_import.h"

namespace rankd {

// nullopt where `loop` is not shaped as the dynamo exporter's (its body takes the bag index and a
// sequence, and gives them back with the loop's condition); the bag where it is one; an error naming
// the node and what differs where it is shaped so but is not one.
StatusOr<std::optional<BagLoop>> MatchDynamoBagLoop(const onnx::NodeProto& loop, const Graph& graph,
                                                    const TensorFromProto& tensor_of);

}  // namespace rankd
