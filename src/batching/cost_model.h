// The batcher's cost model, fitted to timings taken at warm-up (docs/batching.md).
//
// cost(batch) = per_row·rows + per_sequence_element·(ragged ids read) + per_request, in
// microseconds of the executing backend. The budget is where merging stops paying: a batch's
// throughput is within 10% of the fitted limit once the per-request part is a tenth of its cost,
// so the budget is 10·per_request (no fixed cost per run: no budget, every request runs alone).
#pragma once

#include <cstdint>
#include <vector>

namespace rankd {

struct CostSample {
  int64_t rows = 0;
  int64_t sequence_elements = 0;
  double micros = 0;  // the batch's median run time
};

struct FittedCost {
  double per_row = 0;
  double per_sequence_element = 0;
  double per_request = 0;
  double budget = 0;
};

// A batch's cost under `cost`, in microseconds: per_row·rows + per_sequence_element·ids + per_request.
double CostMicros(const FittedCost& cost, int64_t rows, int64_t sequence_elements);

// Least squares over the samples (relative error), coefficients clamped at zero (a coefficient the samples do
// not determine, e.g. no sequence inputs, is zero). REQUIRES: at least one sample.
FittedCost FitCost(const std::vector<CostSample>& samples);

}  // namespace rankd
