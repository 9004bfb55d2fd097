// Open-loop HTTP load against a running rankd (or any KServe v2 server), for `rankd bench server`.
//
// Arrivals are Poisson at the offered rate, scheduled in advance from a seed; each is sent at its
// time on an idle keep-alive connection, or waits in the client's queue when all connections are
// busy. Latency runs from the scheduled time to the answer, so a slow server (or a slow client)
// shows up in the figures instead of lowering the load: no coordinated omission. Requests that
// arrive during the warm-up are sent but not counted. One I/O thread; Boost.Beast.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "rankd/status.h"

namespace rankd {

struct LoadOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string target;               // "/v2/models/NAME/infer"
  // Request bodies, sent in rotation. A body whose json_length is set uses KServe's binary tensor
  // extension: json_length bytes of JSON, then the tensors' bytes.
  struct Body {
    std::string bytes;
    size_t json_length = 0;
  };
  std::vector<Body> bodies;
  double rate = 100;                // offered requests per second
  double seconds = 10;              // measured span (after the warm-up)
  double warmup_seconds = 1;
  int connections = 64;
  double timeout_seconds = 10;      // an answer later than this counts as a timeout
  uint64_t seed = 1;
};

struct LoadResult {
  double offered_rate = 0;
  // Answers with status 200 per second, from the first measured arrival to the last answer.
  double achieved_rate = 0;
  int64_t sent = 0, ok = 0, errors = 0, timeouts = 0;
  std::map<int, int64_t> statuses;  // HTTP status -> count, over the measured span
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, p999_ms = 0, mean_ms = 0, max_ms = 0;
};

// Runs one load level. Fails when the server cannot be reached at all.
StatusOr<LoadResult> RunOpenLoop(const LoadOptions& options);

}  // namespace rankd
