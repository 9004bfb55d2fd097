// Merging requests into one batch and splitting the batch's outputs back (docs/batching.md).
//
// A request reaches the batcher as its graph inputs (ragged inputs as values + offsets; user
// inputs one row per user when the model hoists its user side, else repeated to its candidates).
// Requests merge by concatenating every graph input along its first dimension, TF Serving's rule,
// with ragged offsets shifted by the values before them and each candidate's user row
// (rankd.request_index) by the users before them; CTR graphs are row-wise in the batch
// dimension, so row r of the merged outputs is row r of the request it came from. The model
// checks that at load (Model::Prepare).
#pragma once

#include <cstdint>
#include <vector>

#include "common/prepared_request.h"
#include "rankd/status.h"
#include "rankd/tensor.h"

namespace rankd {

// The sizes of `parts` merged (rows, user rows, longest ragged rows, sequence elements), with no
// inputs: what deciding about a merge needs, without copying anything.
// REQUIRES: `parts` non-empty.
PreparedRequest MergedSizes(const std::vector<const PreparedRequest*>& parts);

// `kinds[i]` says how graph input i is fed (offsets are [rows + 1], int64). With `defer`, the ragged
// values whose every part a GPU's input kernel can read where it lies
// (GatherablePart) are allocated but left unwritten, listed in the result's `deferred`
// (common/deferred_merge.h): a run on a GPU then gathers them on the device from the parts.
// REQUIRES: `parts` non-empty, each with the same inputs in dtype and trailing dims.
PreparedRequest MergeRequests(const std::vector<const PreparedRequest*>& parts,
                              const std::vector<GraphInputKind>& kinds, bool defer = false);

// OK when `whole`'s inputs can be sliced by rows (SliceRequest): each candidate input's first
// dimension its rows (offsets' its rows + 1, within their values), else Internal naming the input.
Status CheckSliceable(const PreparedRequest& whole, const std::vector<GraphInputKind>& kinds);

// Rows [begin, begin + count) of `whole` as a request of their own (a part run by one thread of
// the CPU's: Model's row split): dense inputs and ragged values viewed, not copied, offsets made
// anew from 0, each candidate's user row index viewed; user inputs (one row per user) whole.
// `whole` must outlive the part. REQUIRES: CheckSliceable(whole, kinds), the rows within whole.rows,
// count > 0.
PreparedRequest SliceRequest(const PreparedRequest& whole, const std::vector<GraphInputKind>& kinds, int64_t begin,
                             int64_t count);

// Splits each output along its first dimension into runs of `rows[k]` rows, one per request.
// Internal error when an output is not one row per candidate (the model cannot be batched).
StatusOr<std::vector<std::vector<Tensor>>> SplitRows(const std::vector<Tensor>& outputs,
                                                     const std::vector<int64_t>& rows,
                                                     const std::vector<std::string>& output_names);

// `t` stacked `times` times along its first dimension (user rows repeated to candidates).
Tensor RepeatRows(const Tensor& t, int64_t times);

// Whether two outputs agree: same dtype and shape, floating values within `tolerance` relative
// (|a - b| <= tolerance * (1 + |a|)), others exactly.
bool OutputsAgree(const Tensor& a, const Tensor& b, double tolerance);

}  // namespace rankd
