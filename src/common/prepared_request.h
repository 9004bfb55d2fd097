// A request checked and turned into its graph's inputs (serving/model_inputs.cc builds it), and
// how each graph input is fed: what the compiled model binds, the batcher merges and shape buckets
// pad.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/deferred_merge.h"
#include "rankd/tensor.h"

namespace rankd {

// How a graph input is fed: dense rows, the values / offsets of ragged input `ragged`, or each
// candidate's user row. `user`: one row per user (a hoisted user input), not per candidate.
struct GraphInputKind {
  enum Part { kDense, kValues, kOffsets, kRequestIndex } part = kDense;
  int ragged = -1;
  bool user = false;
  bool operator==(const GraphInputKind&) const = default;
};

// A request checked and turned into graph inputs, ready to run alone or merged with others.
struct PreparedRequest {
  std::vector<Tensor> inputs;  // the graph's inputs; views into the request where possible, so the request outlives it
  std::vector<Tensor> owned;   // what inputs view that the request does not hold (its strings' ids, offsets)
  std::vector<int64_t> ragged_max_lengths;  // longest row of each ragged input
  int64_t rows = 0;                         // candidates
  int64_t users = 0;                        // user rows of a hoisted model (0 otherwise)
  int64_t sequence_elements = 0;            // ragged ids the graph reads, over all inputs
  // Run alone (no batcher): past this the request waits for no executor (its `timeout`, a gRPC
  // call's deadline). A batcher keeps its tasks' deadlines itself.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // A merged batch's inputs not yet written (MergeRequests with `defer`): whoever reads their bytes
  // on the host writes them first. Null for a request and for a batch merged in full.
  std::shared_ptr<DeferredMerge> deferred;
};

}  // namespace rankd
