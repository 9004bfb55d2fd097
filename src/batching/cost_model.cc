#include "batching/cost_model.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "rankd/status.h"

namespace rankd {
namespace {

// Solves the n x n system a·x = b (n <= 3) by Gaussian elimination with partial pivoting;
// unknowns whose pivot vanishes are left at zero.
std::vector<double> Solve(std::vector<std::vector<double>> a, std::vector<double> b) {
  size_t n = b.size();
  std::vector<double> x(n, 0.0);
  std::vector<bool> used(n, false);
  std::vector<size_t> pivot_row(n, n);
  for (size_t col = 0; col < n; ++col) {
    size_t best = n;
    for (size_t r = 0; r < n; ++r) {
      if (!used[r] && (best == n || std::fabs(a[r][col]) > std::fabs(a[best][col]))) best = r;
    }
    if (best == n || std::fabs(a[best][col]) < 1e-9) continue;
    used[best] = true;
    pivot_row[col] = best;
    for (size_t r = 0; r < n; ++r) {
      if (r == best) continue;
      double f = a[r][col] / a[best][col];
      for (size_t c = col; c < n; ++c) a[r][c] -= f * a[best][c];
      b[r] -= f * b[best];
    }
  }
  for (size_t col = 0; col < n; ++col) {
    if (pivot_row[col] < n) x[col] = b[pivot_row[col]] / a[pivot_row[col]][col];
  }
  return x;
}

}  // namespace

std::vector<LengthProbe> SequenceProbes(int64_t max_rows, int64_t longest) {
  std::vector<LengthProbe> probes;
  const int64_t fit = std::clamp<int64_t>(kSequenceProbeIds / std::max<int64_t>(longest, 1), 16, kSequenceProbeRows);
  const int64_t rows = std::max<int64_t>(1, std::min(fit, max_rows));
  for (int64_t length : {longest / 8, longest / 2, longest}) {
    if (length > 1 && (probes.empty() || probes.back().length < length)) probes.push_back({rows, length});
  }
  return probes;
}

double CostMicros(const FittedCost& cost, int64_t rows, int64_t sequence_elements) {
  return cost.per_row * static_cast<double>(rows) + cost.per_sequence_element * static_cast<double>(sequence_elements) +
         cost.per_request;
}

FittedCost FitCost(const std::vector<CostSample>& row_samples, const std::vector<CostSample>& sequence_samples) {
  RANKD_CHECK(!row_samples.empty());
  // Least squares on relative error (each sample weighted by 1/micros², so the small batches count
  // as much as the large ones) of micros - `fixed` over `features`.
  auto solve = [](const std::vector<const CostSample*>& samples, auto features, double fixed) {
    constexpr size_t n = std::tuple_size_v<decltype(features(CostSample{}))>;
    std::vector<std::vector<double>> ata(n, std::vector<double>(n, 0.0));
    std::vector<double> atb(n, 0.0);
    for (const CostSample* s : samples) {
      const auto f = features(*s);
      const double w = 1.0 / std::max(s->micros * s->micros, 1e-6);
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < n; ++j) ata[i][j] += w * f[i] * f[j];
        atb[i] += w * f[i] * (s->micros - fixed);
      }
    }
    return Solve(ata, atb);
  };
  std::vector<const CostSample*> rows, lengths;
  for (const CostSample& s : row_samples) rows.push_back(&s);
  for (const CostSample& s : sequence_samples) lengths.push_back(&s);
  // A row probe of the same rows is the slope's point at one id a ragged row (W1: 26 ids a row where
  // its sequence probes have 111-214).
  for (const CostSample& s : row_samples) {
    if (!lengths.empty() && s.rows == lengths.front()->rows) lengths.push_back(&s);
  }
  // A batch's time over its rows, from the row probes: its fixed part shows as the time of the
  // smallest batches. Fitted with the sequence probes in one least squares, a sequence cost not
  // linear in its ids (W2's attention grows with rows x ids) pulled it below zero, clamped to no
  // budget, and the model never merged; the row probes' ids (one a ragged row) are in the slope.
  FittedCost fit;
  const std::vector<double> line = solve(
      rows,
      [](const CostSample& s) {
        return std::array<double, 2>{static_cast<double>(s.rows), 1.0};
      },
      0.0);
  fit.per_request = std::max(0.0, line[1]);
  // An id's cost: the slope of the sequence probes' times over their ids (probes of one row count,
  // growing lengths; docs/batching.md).
  if (lengths.size() >= 2) {
    const std::vector<double> slope = solve(
        lengths,
        [](const CostSample& s) {
          return std::array<double, 2>{static_cast<double>(s.sequence_elements), 1.0};
        },
        0.0);
    fit.per_sequence_element = std::max(0.0, slope[0]);
  }
  // A row's cost: the slope less what its ids cost, as many a row as the largest row probe had.
  const CostSample& largest = *std::max_element(
      row_samples.begin(), row_samples.end(), [](const CostSample& a, const CostSample& b) { return a.rows < b.rows; });
  const double ids_a_row =
      static_cast<double>(largest.sequence_elements) / static_cast<double>(std::max<int64_t>(largest.rows, 1));
  fit.per_row = std::max(0.0, line[0] - fit.per_sequence_element * ids_a_row);
  if (fit.per_row == 0 && fit.per_sequence_element == 0 && fit.per_request == 0) fit.per_row = 1e-3;
  // Throughput rows / (per_row·rows + per_request) is within 10% of its limit once the batch's
  // fixed part is a tenth of its cost.
  fit.budget = 10.0 * fit.per_request;
  return fit;
}

}  // namespace rankd
