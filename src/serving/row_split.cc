#include "serving/row_split.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace rankd {

int RowSplitParts(const RowSplitPolicy& policy, int64_t rows) {
  if (policy.mode == CpuRowSplit::kOff || policy.threads < 2) return 1;
  const int64_t parts = std::min<int64_t>(policy.threads, rows / RowSplitPolicy::kMinPartRows);
  if (parts < 2) return 1;
  if (policy.mode == CpuRowSplit::kOn) return static_cast<int>(parts);
  const RowSplitPolicy::Probe* nearest = nullptr;
  double distance = 0;
  for (const RowSplitPolicy::Probe& p : policy.probes) {
    double d = std::fabs(std::log(static_cast<double>(rows) / static_cast<double>(p.rows)));
    if (!nearest || d < distance) nearest = &p, distance = d;
  }
  return nearest && nearest->split ? static_cast<int>(parts) : 1;
}

bool RowSplitPays(double whole_us, double split_us) { return split_us <= 0.8 * whole_us; }

std::string RowSplitSummary(const RowSplitPolicy& policy) {
  if (policy.mode == CpuRowSplit::kOff || policy.threads < 2) return "off";
  std::string s = std::string(CpuRowSplitName(policy.mode)) + ", up to " + std::to_string(policy.threads) +
                  " parts of " + std::to_string(RowSplitPolicy::kMinPartRows) + " rows or more";
  for (const RowSplitPolicy::Probe& p : policy.probes) {
    char line[160];
    std::snprintf(line, sizeof line, "; %lld rows: %.0f us whole, %.0f split (%s)", static_cast<long long>(p.rows),
                  p.whole_us, p.split_us, p.split ? "split" : "whole");
    s += line;
  }
  return s;
}

}  // namespace rankd
