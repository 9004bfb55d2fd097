#include "batching/cost_model.h"

#include <algorithm>
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

double CostMicros(const FittedCost& cost, int64_t rows, int64_t sequence_elements) {
  return cost.per_row * static_cast<double>(rows) + cost.per_sequence_element * static_cast<double>(sequence_elements) +
         cost.per_request;
}

FittedCost FitCost(const std::vector<CostSample>& samples) {
  RANKD_CHECK(!samples.empty());
  // Normal equations for micros = per_row·rows + per_seq·seq + per_request, each sample weighted
  // by 1/micros², so the fit minimises relative error and the small batches count as much as
  // the large ones.
  std::vector<std::vector<double>> ata(3, std::vector<double>(3, 0.0));
  std::vector<double> atb(3, 0.0);
  for (const CostSample& s : samples) {
    double f[3] = {static_cast<double>(s.rows), static_cast<double>(s.sequence_elements), 1.0};
    double w = 1.0 / std::max(s.micros * s.micros, 1e-6);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) ata[i][j] += w * f[i] * f[j];
      atb[i] += w * f[i] * s.micros;
    }
  }
  std::vector<double> x = Solve(ata, atb);
  FittedCost fit;
  fit.per_row = std::max(0.0, x[0]);
  fit.per_sequence_element = std::max(0.0, x[1]);
  fit.per_request = std::max(0.0, x[2]);
  if (fit.per_row == 0 && fit.per_sequence_element == 0 && fit.per_request == 0) fit.per_row = 1e-3;
  // Throughput rows / (per_row·rows + per_request) is within 10% of its limit once the batch's
  // fixed part is a tenth of its cost.
  fit.budget = 10.0 * fit.per_request;
  return fit;
}

}  // namespace rankd
