#include "common/latency_histogram.h"

#include <algorithm>

namespace rankd {

void LatencyHistogram::Add(double seconds) {
  const size_t bucket =
      static_cast<size_t>(std::lower_bound(kBounds.begin(), kBounds.end(), seconds) - kBounds.begin());
  ++counts[bucket];
  sum_seconds += seconds;
  ++count;
}

LatencyHistogram& LatencyHistogram::operator+=(const LatencyHistogram& other) {
  for (size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
  sum_seconds += other.sum_seconds;
  count += other.count;
  return *this;
}

uint64_t LatencyHistogram::AtMost(size_t i) const {
  uint64_t total = 0;
  for (size_t b = 0; b <= std::min(i, counts.size() - 1); ++b) total += counts[b];
  return total;
}

}  // namespace rankd
