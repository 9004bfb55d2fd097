// The batcher's cost model, fitted to timings taken at warm-up (docs/batching.md).
//
// cost(batch) = per_row·rows + per_sequence_element·(ragged ids read) + per_request, in
// microseconds of the executing backend. The budget is the cost of the smallest measured batch
// whose throughput (rows per second) is within 10% of the best measured: past it, merging more
// requests adds latency without adding throughput.
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

// Least squares over the samples, coefficients clamped at zero (a coefficient the samples do
// not determine, e.g. no sequence inputs, is zero). REQUIRES: at least one sample.
FittedCost FitCost(const std::vector<CostSample>& samples);

}  // namespace rankd
