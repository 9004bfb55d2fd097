// Open-loop load against a running rankd (or any KServe v2 server), for `rankd bench server`.
//
// Arrivals are Poisson at the offered rate, scheduled in advance from a seed. Latency runs from
// the scheduled time to the answer, so a slow server (or a slow client) shows up in the figures
// instead of lowering the load: no coordinated omission. Requests that arrive during the warm-up
// are sent but not counted.
//  - HTTP (http_load_generator.cc): each arrival is sent at its time on an idle keep-alive
//    connection, or waits in the client's queue while all connections are busy. `threads` I/O
//    threads, each with its share of the connections and of the rate; Boost.Beast.
//  - gRPC (grpc_load_generator.cc): each arrival is a call at its time on the next of
//    `connections` channels (HTTP/2 streams, never queued by the client); `threads` threads issue
//    calls, each with its share of the rate, one completion-queue thread collects the answers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "rankd/status.h"

namespace rankd {

struct LoadOptions {
  enum class Protocol { kHttp, kGrpc };
  Protocol protocol = Protocol::kHttp;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string target;  // HTTP: "/v2/models/NAME/infer"
  // Request bodies, sent in rotation. HTTP: a body whose json_length is set uses KServe's binary
  // tensor extension: json_length bytes of JSON, then the tensors' bytes. gRPC: a serialized
  // inference.ModelInferRequest.
  struct Body {
    std::string bytes;
    size_t json_length = 0;
  };
  std::vector<Body> bodies;
  double rate = 100;    // offered requests per second
  double seconds = 10;  // measured span (after the warm-up)
  double warmup_seconds = 1;
  int connections = 64;         // HTTP connections or gRPC channels
  int threads = 1;              // client threads sending, each with its share of the rate (HTTP: and connections)
  double timeout_seconds = 10;  // an answer later than this counts as a timeout
  uint64_t seed = 1;
};

struct LoadResult {
  double offered_rate = 0;
  // Answers with status 200 per second, from the first measured arrival to the last answer.
  double achieved_rate = 0;
  int64_t sent = 0, ok = 0, errors = 0, timeouts = 0;
  std::map<int, int64_t> statuses;  // HTTP status or gRPC code -> count, over the measured span
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, p999_ms = 0, mean_ms = 0, max_ms = 0;
  // The medians of the measured span's four quarters (by arrival time): max / min - 1. Large
  // when the server falls behind (latency grows through the run) or the machine was busy.
  double spread = 0;
};

// A load level's result as `rankd bench server` and `bench load` write it (JSON).
nlohmann::json LoadResultJson(const LoadResult& result);

// Runs one load level. Fails when the server cannot be reached at all.
StatusOr<LoadResult> RunOpenLoop(const LoadOptions& options);
// The run's schedule: Poisson arrivals at options.rate (from options.seed) over the warm-up and
// the measured span, starting at `start`.
std::vector<std::chrono::steady_clock::time_point> PoissonArrivals(const LoadOptions& options,
                                                                   std::chrono::steady_clock::time_point start);

// Sender `k` of `n`'s share of a run: rate / n, its own seed (independent Poisson streams add up to
// one at the full rate) and, for HTTP, its share of the connections.
LoadOptions ShareOf(const LoadOptions& options, int k, int n);

// The two protocols' runners, which RunOpenLoop picks from (options already checked).
StatusOr<LoadResult> RunHttpLoad(const LoadOptions& options);
StatusOr<LoadResult> RunGrpcLoad(const LoadOptions& options);

// Collects what a load run saw and turns it into a LoadResult; used by both protocols.
class LoadRecorder {
 public:
  // `measured_seconds`: the span whose arrivals count.
  explicit LoadRecorder(double measured_seconds) : seconds_(measured_seconds) {}
  // An answer (or failure) to the request scheduled `arrival_s` after the measured span began
  // (negative: in the warm-up, not counted), `now_s` on the same clock.
  void Answer(double arrival_s, double now_s, int status, bool ok);
  void Error(double arrival_s);
  void Timeout(double arrival_s);
  void Unsent(int64_t count) { result_.errors += count; }
  // Adds what `other` (another thread's recorder over the same span) saw.
  void Merge(const LoadRecorder& other);
  LoadResult Summarise(double offered_rate) const;

 private:
  bool Counted(double arrival_s) const { return arrival_s >= 0 && arrival_s < seconds_; }
  double seconds_;
  double last_answer_s_ = 0;
  LoadResult result_;
  std::vector<std::pair<double, double>> samples_;  // (arrival s, latency ms) of counted answers
};

}  // namespace rankd
