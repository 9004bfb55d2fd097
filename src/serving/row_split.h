// Which CPU runs split their rows over the CPU's threads (docs/engine.md, "Rows over the CPU's
// threads"): the decision alone, from what timing both ways at load found. Plain data and
// functions, no state.
//
// A run on the CPU backend either runs each op over all threads (the ops' own loops split their
// work: every op then pays a fork and a join, and reads what other cores wrote) or splits the
// request's rows into parts, each run whole by one thread (the same plan at a smaller shape, its
// data in that core's cache). Ranking graphs are row-wise, as batching needs; which way is faster
// depends on the model: small products and many small ops favour parts, large weights read again
// by every part do not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace rankd {

struct RowSplitPolicy {
  static constexpr int64_t kMinPartRows = 4;  // rows per part at least
  CpuRowSplit mode = CpuRowSplit::kOff;
  int threads = 1;  // parts at most
  // kAuto: per probed size (ascending rows), whether the split runs were faster there.
  struct Probe {
    int64_t rows = 0;
    double whole_us = 0, split_us = 0;
    bool split = false;
  };
  std::vector<Probe> probes;
};

// The parts a run of `rows` rows splits into: 1 (not split), or between 2 and policy.threads, each
// of kMinPartRows rows at least. kAuto follows the probe nearest `rows` (by ratio of rows).
int RowSplitParts(const RowSplitPolicy& policy, int64_t rows);

// Whether a probe's split runs pay: at most 0.8 of the whole runs' time (a margin over the
// noise of a few timed runs).
bool RowSplitPays(double whole_us, double split_us);

// One line for `rankd inspect` and the load log: "off", or the mode with each probe's times.
std::string RowSplitSummary(const RowSplitPolicy& policy);

}  // namespace rankd
