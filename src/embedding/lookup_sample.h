// What a cache keeper copies of a run's inputs to learn which rows are hot (cache_keeper.h), and
// the same sample taken by the simulator that predicts what the server's caches hit
// (cache_replay.h): the graph inputs that feed lookups of the cached tables, and those ids are
// computed from, every row of each or, past `sample_ids` ids in an offer, every k-th row from a
// row that moves from offer to offer.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "embedding/lookup_trace.h"
#include "model/graph.h"
#include "rankd/tensor.h"

namespace rankd {

// The ids a keeper of some of a graph's tables samples.
struct LookupSampling {
  size_t graph_inputs = 0;            // the graph's inputs (a sample holds as many tensors)
  std::vector<size_t> inputs;         // graph input positions feeding the tables' lookups, ascending
  std::vector<ComputedIds> computed;  // ids computed from inputs (only when asked for)
  std::vector<size_t> aligned;        // inputs ids are computed from together: sampled at one stride, ascending
};

// The sampling of the lookups of `tables` (by value id); `with_computed`: also of ids the graph
// computes from inputs (FindComputedIds), which need a NodeEvaluator to be traced.
LookupSampling PlanLookupSampling(const Graph& graph, const std::vector<int>& tables, bool with_computed);

// The sample of offer number `offer` (graph order; inputs not sampled stay undefined): each sampled
// input whole while the offer's sampled inputs hold at most `sample_ids` ids between them (an even
// share each), else every stride-th row from row `offer` % stride, so a batch seen again is not
// sampled at the same places. Aligned inputs share the largest of their strides: the same rows.
std::vector<Tensor> SampleLookupInputs(const LookupSampling& sampling, std::span<const Tensor> graph_inputs,
                                       int64_t sample_ids, uint64_t offer);

}  // namespace rankd
