// LatencyHistogram: counts of durations in fixed buckets, as a Prometheus histogram shows them
// (cumulative `le` buckets, their sum and count). Plain data: the owner guards it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace rankd {

struct LatencyHistogram {
  // Upper bounds of the buckets, in seconds (then +Inf): 100 µs to 1 s, for a batch of reads from
  // a disk (a 4 KiB read takes 0.1-1 ms; a batch of thousands, tens of ms).
  static constexpr std::array<double, 11> kBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                     0.01,   0.025,   0.05,   0.1,   1.0};

  std::array<uint64_t, kBounds.size() + 1> counts{};  // per bucket, not cumulative; the last: past 1 s
  double sum_seconds = 0;
  uint64_t count = 0;

  void Add(double seconds);
  LatencyHistogram& operator+=(const LatencyHistogram& other);
  // Observations at most kBounds[i] seconds (i == kBounds.size(): all of them).
  uint64_t AtMost(size_t i) const;
};

}  // namespace rankd
