// Request files for the benchmarks: KServe v2 JSON bodies, one per line, and the latency
// statistics both `rankd bench` modes report.
#pragma once

#include <string>
#include <vector>

#include "common/parsed_request.h"
#include "rankd/request.h"
#include "rankd/status.h"

namespace rankd {

struct RequestLine {
  std::string text;  // the line as read
  InferRequest request;
  std::vector<LengthSums> length_sums;  // as a server's parser sums them (common/parsed_request.h)
};

// Reads every non-blank line as a request body; a line that does not parse fails the whole file
// (naming its line number), and so does a file whose inputs are all zero: timing those measures
// a cache-resident toy, not the model.
StatusOr<std::vector<RequestLine>> ReadRequestFile(const std::string& path);

// How far apart the medians of four parts of a run are (max / min - 1); 0 when a part has fewer
// than 2 samples. Large when the machine was busy, clocks moved, or a server fell behind.
double QuarterSpread(const std::vector<std::vector<double>>& quarters);

}  // namespace rankd
