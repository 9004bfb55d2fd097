// Merging requests into one batch and splitting the batch's outputs back (docs/batching.md).
//
// A request reaches the batcher as its graph inputs (user rows already repeated to its
// candidates, ragged inputs as values + offsets). Requests merge by concatenating every graph
// input along its first dimension, TF Serving's rule, with ragged offsets shifted by the values
// before them; CTR graphs are row-wise in the batch dimension, so row r of the merged outputs is
// row r of the request it came from. The model checks that at load (Model::Prepare).
#pragma once

#include <cstdint>
#include <vector>

#include "rankd/status.h"
#include "rankd/tensor.h"

namespace rankd {

// How a graph input is fed: dense rows, or the values / offsets of ragged input `ragged`.
struct GraphInputKind {
  enum Part { kDense, kValues, kOffsets } part = kDense;
  int ragged = -1;
};

// A request checked and turned into graph inputs, ready to run alone or merged with others.
struct PreparedRequest {
  std::vector<Tensor> inputs;  // the graph's inputs; views into the request where possible, so the request outlives it
  std::vector<int64_t> ragged_max_lengths;  // longest row of each ragged input
  int64_t rows = 0;                         // candidates
  int64_t sequence_elements = 0;            // ragged ids the graph reads, over all inputs
};

// `kinds[i]` says how graph input i is fed (offsets are [rows + 1], int64).
// REQUIRES: `parts` non-empty, each with the same inputs in dtype and trailing dims.
PreparedRequest MergeRequests(const std::vector<const PreparedRequest*>& parts, const std::vector<GraphInputKind>& kinds);

// Splits each output along its first dimension into runs of `rows[k]` rows, one per request.
// Internal error when an output is not one row per candidate (the model cannot be batched).
StatusOr<std::vector<std::vector<Tensor>>> SplitRows(const std::vector<Tensor>& outputs,
                                                     const std::vector<int64_t>& rows,
                                                     const std::vector<std::string>& output_names);

// Whether two outputs agree: same dtype and shape, floating values within `tolerance` relative
// (|a - b| <= tolerance * (1 + |a|)), others exactly.
bool OutputsAgree(const Tensor& a, const Tensor& b, double tolerance);

}  // namespace rankd
