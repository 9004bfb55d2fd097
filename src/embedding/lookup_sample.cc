#include "embedding/lookup_sample.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace rankd {
namespace {

// The stride at which rows of `t` (its first dimension) are sampled so that at most `limit` ids are
// kept (at least one row); 1: every row.
int64_t StrideFor(const Tensor& t, int64_t limit) {
  if (t.size() <= limit || t.rank() == 0 || t.dim(0) <= 1) return 1;
  const int64_t rows = t.dim(0), per_row = t.size() / rows;
  const int64_t kept = std::max<int64_t>(1, limit / std::max<int64_t>(per_row, 1));
  return (rows + kept - 1) / kept;
}

// Every stride-th row of `t` from row `start` % stride, copied: a sample spread over the whole
// batch, whose rows may come from different requests.
Tensor Sample(const Tensor& t, int64_t stride, uint64_t start) {
  if (stride <= 1 || t.rank() == 0 || t.dim(0) <= 1) return t.Clone();
  const int64_t rows = t.dim(0), per_row = t.size() / rows;
  const auto first = static_cast<int64_t>(start % static_cast<uint64_t>(stride));
  Shape shape = t.shape();
  shape[0] = (rows - first + stride - 1) / stride;
  Tensor sample = Tensor::Empty(t.dtype(), shape);
  const size_t row_bytes = static_cast<size_t>(per_row) * DTypeSize(t.dtype());
  const auto* from = static_cast<const uint8_t*>(t.raw());
  auto* to = static_cast<uint8_t*>(sample.raw());
  for (int64_t r = 0; r < shape[0]; ++r) {
    std::memcpy(to + static_cast<size_t>(r) * row_bytes, from + static_cast<size_t>(first + r * stride) * row_bytes,
                row_bytes);
  }
  return sample;
}

}  // namespace

LookupSampling PlanLookupSampling(const Graph& graph, const std::vector<int>& tables, bool with_computed) {
  LookupSampling s;
  s.graph_inputs = graph.inputs.size();
  const std::vector<size_t> read = LookupIdInputs(graph, tables);
  std::set<size_t> inputs(read.begin(), read.end()), aligned;
  if (with_computed) {
    s.computed = FindComputedIds(graph, tables);
    for (const ComputedIds& c : s.computed) {
      inputs.insert(c.inputs.begin(), c.inputs.end());
      if (c.inputs.size() > 1) aligned.insert(c.inputs.begin(), c.inputs.end());
    }
  }
  s.inputs.assign(inputs.begin(), inputs.end());
  s.aligned.assign(aligned.begin(), aligned.end());
  return s;
}

std::vector<Tensor> SampleLookupInputs(const LookupSampling& sampling, std::span<const Tensor> graph_inputs,
                                       int64_t sample_ids, uint64_t offer) {
  std::vector<Tensor> kept(sampling.graph_inputs);
  if (sampling.inputs.empty()) return kept;
  const int64_t per_input = std::max<int64_t>(1, sample_ids / static_cast<int64_t>(sampling.inputs.size()));
  auto given = [&](size_t i) { return i < graph_inputs.size() && graph_inputs[i].defined(); };
  int64_t together = 1;
  for (size_t i : sampling.aligned) {
    if (given(i)) together = std::max(together, StrideFor(graph_inputs[i], per_input));
  }
  for (size_t i : sampling.inputs) {
    if (!given(i)) continue;
    const bool aligned = std::binary_search(sampling.aligned.begin(), sampling.aligned.end(), i);
    kept[i] = Sample(graph_inputs[i], aligned ? together : StrideFor(graph_inputs[i], per_input), offer);
  }
  return kept;
}

}  // namespace rankd
