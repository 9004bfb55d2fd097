// PyTorch's nn.EmbeddingBag with padding_idx as torch.onnx's dynamo exporter writes it (onnxscript's
// aten_embedding_bag_padding_idx). Before the Loop, as without padding_idx (dynamo_bag_import.h):
//
//   rows    = Mul(Gather(table, ids), Unsqueeze(Expand(1, Shape(ids)), [1]))
//   bounds  = Concat(offsets, Reshape(Size(ids), [-1]))
//   Loop(cond Less(0, Size(offsets)), carrying the bag index i = 0 and SequenceEmpty())
//
// In its body bag i's start and end are Gather(bounds, i) and Gather(bounds, i + 1), and a Loop over
// the bag's ids j = start .. end (while start < end, then while j + 1 < end) collects the positions
// whose id is not padding_idx: it carries an empty INT64 tensor and concatenates
// Reshape(j, [-1]) to it when Not(Equal(id, padding_idx)), where id is Gather(ids, j), or id plus
// the table's rows where it is negative (If(Less(id, 0), Add(id, rows), id)). If(Size(positions) ==
// 0) inserts a row of zeros, else Reduce{Sum,Mean,Max}(Gather(rows, positions), axes [0]). The
// body gives back i + 1, the sequence with the row inserted and i + 1 < Size(offsets); the Loop's
// second output is the sequence, which a ConcatFromSequence(axis 0) stacks after it.
//
// That is EmbeddingBag(table, Where(ids == padding_idx, -1, ids), bounds): a negative id is an
// empty slot of a bag, skipped by the sum and the max and not counted by the mean, as PyTorch skips
// padding_idx (a negative id, which PyTorch refuses, is skipped too rather than read from the
// table's end).
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>

#include "model/bag_loop_import.h"

namespace rankd {

// nullopt where `loop` is not a Loop over bags with a Loop inside its body; the bag where it is the
// padding_idx form; an error naming the node and what differs where it has the inner Loop but is
// not that form.
StatusOr<std::optional<BagLoop>> MatchDynamoPaddingBagLoop(const onnx::NodeProto& loop, const Graph& graph,
                                                           const TensorFromProto& tensor_of);

}  // namespace rankd
