#include "tools/load_generator.h"

#include <algorithm>
#include <random>

#include "tools/request_file.h"

namespace rankd {

void LoadRecorder::Answer(double arrival_s, double now_s, int status, bool ok) {
  if (!Counted(arrival_s)) return;
  ++result_.sent;
  ++result_.statuses[status];
  if (!ok) {
    ++result_.errors;
    return;
  }
  ++result_.ok;
  samples_.emplace_back(arrival_s, (now_s - arrival_s) * 1000.0);
  last_answer_s_ = std::max(last_answer_s_, now_s);
}

void LoadRecorder::Error(double arrival_s) {
  if (!Counted(arrival_s)) return;
  ++result_.sent;
  ++result_.errors;
}

void LoadRecorder::Timeout(double arrival_s) {
  if (!Counted(arrival_s)) return;
  ++result_.sent;
  ++result_.timeouts;
}

LoadOptions ShareOf(const LoadOptions& options, int k, int n) {
  LoadOptions share = options;
  share.rate = options.rate / n;
  share.seed = options.seed + static_cast<uint64_t>(k) * 7919;
  share.connections = options.connections / n + (k < options.connections % n ? 1 : 0);
  return share;
}

void LoadRecorder::Merge(const LoadRecorder& other) {
  result_.sent += other.result_.sent;
  result_.ok += other.result_.ok;
  result_.errors += other.result_.errors;
  result_.timeouts += other.result_.timeouts;
  for (const auto& [status, count] : other.result_.statuses) result_.statuses[status] += count;
  samples_.insert(samples_.end(), other.samples_.begin(), other.samples_.end());
  last_answer_s_ = std::max(last_answer_s_, other.last_answer_s_);
}

LoadResult LoadRecorder::Summarise(double offered_rate) const {
  LoadResult r = result_;
  r.offered_rate = offered_rate;
  // Answers over the span from the first counted arrival to the last counted answer: a server
  // that falls behind answers late and its rate drops below the offered one.
  r.achieved_rate = static_cast<double>(r.ok) / std::max(seconds_, last_answer_s_);
  std::vector<double> v;
  std::vector<std::vector<double>> quarters(4);
  for (const auto& [arrival_s, ms] : samples_) {
    v.push_back(ms);
    quarters[std::min<size_t>(3, static_cast<size_t>(4 * arrival_s / seconds_))].push_back(ms);
  }
  std::sort(v.begin(), v.end());
  auto q = [&](double p) {
    return v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
  };
  r.p50_ms = q(0.5);
  r.p90_ms = q(0.9);
  r.p99_ms = q(0.99);
  r.p999_ms = q(0.999);
  r.max_ms = v.empty() ? 0.0 : v.back();
  double sum = 0;
  for (double x : v) sum += x;
  r.mean_ms = v.empty() ? 0.0 : sum / static_cast<double>(v.size());
  r.spread = QuarterSpread(quarters);
  return r;
}

std::vector<std::chrono::steady_clock::time_point> PoissonArrivals(const LoadOptions& o,
                                                                   std::chrono::steady_clock::time_point start) {
  std::mt19937_64 rng(o.seed);
  std::exponential_distribution<double> gap(o.rate);
  std::vector<std::chrono::steady_clock::time_point> arrivals;
  for (double t = gap(rng); t < o.warmup_seconds + o.seconds; t += gap(rng)) {
    arrivals.push_back(
        start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(t)));
  }
  return arrivals;
}

StatusOr<LoadResult> RunOpenLoop(const LoadOptions& options) {
  if (options.bodies.empty()) return InvalidArgument("no request bodies");
  if (!(options.rate > 0)) return InvalidArgument("the rate must be positive");
  if (!(options.seconds > 0)) return InvalidArgument("the measured span must be positive");
  return options.protocol == LoadOptions::Protocol::kGrpc ? RunGrpcLoad(options) : RunHttpLoad(options);
}

nlohmann::json LoadResultJson(const LoadResult& r) {
  nlohmann::json statuses = nlohmann::json::object();
  for (const auto& [code, count] : r.statuses) statuses[std::to_string(code)] = count;
  return {{"offered_rate", r.offered_rate},
          {"achieved_rate", r.achieved_rate},
          {"sent", r.sent},
          {"ok", r.ok},
          {"errors", r.errors},
          {"timeouts", r.timeouts},
          {"statuses", statuses},
          {"p50_ms", r.p50_ms},
          {"p90_ms", r.p90_ms},
          {"p99_ms", r.p99_ms},
          {"p999_ms", r.p999_ms},
          {"mean_ms", r.mean_ms},
          {"max_ms", r.max_ms},
          {"spread", r.spread}};
}

}  // namespace rankd
