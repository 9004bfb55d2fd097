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

// The batches timed for the sequence cost, as (rows, ragged length) pairs, beside those of 1, 4, 16, ... rows
// at length 1: `longest` is the largest max_length of the model's ragged inputs, the lengths spread up
// to it (each above 1, distinct), and the rows are as many as kSequenceProbeIds ids of the longest
// allow, between 16 and kSequenceProbeRows (and at most max_rows). At 16 rows with
// lengths 8, 64 and 256, as before 2026-12-04, W1's inputs (max lengths 1-100, 214 ids a row at most)
// gave two identical probes and a third whose time differed from them by the timer's noise, so the
// fit gave the sequence cost at random: 0 or 0.0035 µs an id in two starts, a request's cost then
// 26 or 110 µs, merges of 14 or 7 W1 requests (docs/log/benchmarks.md).
struct LengthProbe {
  int64_t rows = 0;
  int64_t length = 0;
};
inline constexpr int64_t kSequenceProbeRows = 256;
inline constexpr int64_t kSequenceProbeIds = 65536;
std::vector<LengthProbe> SequenceProbes(int64_t max_rows, int64_t longest);

// A batch's cost under `cost`, in microseconds: per_row·rows + per_sequence_element·ids + per_request.
double CostMicros(const FittedCost& cost, int64_t rows, int64_t sequence_elements);

// The costs from timings, each clamped at zero: the fixed part and a row's cost from `row_samples`
// (batches of growing rows, ragged rows of one id; least squares on relative error), an id's cost
// from `sequence_samples` (batches of one row count, growing lengths: the slope of their times over
// their ids, with the row probe of that count; zero with fewer than two points), the ids of a row probe taken out of
// its row's cost. REQUIRES: at least one row sample.
FittedCost FitCost(const std::vector<CostSample>& row_samples, const std::vector<CostSample>& sequence_samples = {});

}  // namespace rankd
