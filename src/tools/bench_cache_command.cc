// rankd bench cache: the GPU cache's policy (embedding/cache_policy.h) on a synthetic Zipf trace,
// against Belady's optimum and the static oracle (embedding/cache_bounds.h), per cache size.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedding/access_trace.h"
#include "embedding/cache_bounds.h"
#include "embedding/cache_policy.h"
#include "embedding/hotness_snapshot.h"
#include "tools/commands.h"

namespace rankd {
namespace {

struct PolicyRun {
  int64_t hits = 0;
  double ns_per_access = 0;
};

PolicyRun RunPolicy(CachePolicy& policy, std::span<const uint64_t> trace) {
  PolicyRun run;
  const auto start = std::chrono::steady_clock::now();
  constexpr size_t kAhead = 8;  // as the server's keeper feeds it (embedding/cache_keeper.cc)
  for (size_t i = 0; i < trace.size(); ++i) {
    if (i + kAhead < trace.size()) policy.Prefetch(trace[i + kAhead]);
    run.hits += policy.Access(trace[i]) ? 1 : 0;
  }
  const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
  run.ns_per_access = trace.empty() ? 0 : took.count() / static_cast<double>(trace.size());
  return run;
}

double Ratio(int64_t hits, size_t accesses) {
  return accesses ? static_cast<double>(hits) / static_cast<double>(accesses) : 0;
}

// How fast the policy follows a moving hot set: after each move (every `drift_every` accesses; the
// first stretch is the cold start, not a move), the accesses it takes until a window of them
// (a fiftieth of a stretch) hits at least 90% of what the stretch's own static oracle hits over
// the whole stretch.
struct Recovery {
  int64_t moves = 0, recovered = 0;
  int64_t median = -1, most = -1;  // accesses after a move, over the moves that recovered
};

Recovery MeasureRecovery(const CachePolicyOptions& options, std::span<const uint64_t> trace, int64_t drift_every) {
  CachePolicy policy(options);
  const int64_t window = std::max<int64_t>(1, drift_every / 50);
  std::vector<int64_t> took;
  Recovery r;
  for (size_t start = 0; start < trace.size(); start += static_cast<size_t>(drift_every)) {
    const std::span<const uint64_t> stretch =
        trace.subspan(start, std::min(trace.size() - start, static_cast<size_t>(drift_every)));
    const double target = 0.9 * Ratio(StaticOracleHits(stretch, options.capacity), stretch.size());
    int64_t at = -1;
    for (size_t w = 0; w < stretch.size(); w += static_cast<size_t>(window)) {
      const size_t end = std::min(stretch.size(), w + static_cast<size_t>(window));
      int64_t hits = 0;
      for (size_t i = w; i < end; ++i) hits += policy.Access(stretch[i]) ? 1 : 0;
      if (at < 0 && end - w == static_cast<size_t>(window) && Ratio(hits, end - w) >= target)
        at = static_cast<int64_t>(end);
    }
    if (start == 0) continue;
    ++r.moves;
    if (at >= 0) ++r.recovered, took.push_back(at);
  }
  if (!took.empty()) {
    std::sort(took.begin(), took.end());
    r.median = took[took.size() / 2];
    r.most = took.back();
  }
  return r;
}

}  // namespace

int BenchCacheCommand(const BenchCacheArgs& args) {
  TraceOptions t;
  t.rows = args.rows;
  t.zipf = args.zipf;
  t.accesses = args.accesses;
  t.drift_every = args.drift_every;
  t.drift_rows = args.drift_rows;
  t.seed = args.seed;
  const std::vector<uint64_t> trace = MakeTrace(t);
  const std::span<const uint64_t> all(trace), first = all.first(trace.size() / 2), second = all.subspan(first.size());
  std::printf("trace: %lld accesses over %lld rows, Zipf s = %.3g, %s\n", static_cast<long long>(t.accesses),
              static_cast<long long>(t.rows), t.zipf,
              t.drift_every > 0 ? ("the hot set moving " + std::to_string(t.drift_rows) + " ranks every " +
                                   std::to_string(t.drift_every) + " accesses")
                                      .c_str()
                                : "stationary");
  std::printf("%10s  %8s  %8s  %8s  %8s  %12s  %12s  %9s\n", "capacity", "policy", "belady", "oracle", "policy/",
              "2nd half", "2nd half", "ns per");
  std::printf("%10s  %8s  %8s  %8s  %8s  %12s  %12s  %9s\n", "(rows)", "", "", "(static)", "belady", "cold",
              "warm-started", "access");
  nlohmann::json out = {{"command", args.command_line},
                        {"rows", t.rows},
                        {"zipf", t.zipf},
                        {"accesses", t.accesses},
                        {"drift_every", t.drift_every},
                        {"drift_rows", t.drift_rows},
                        {"results", nlohmann::json::array()}};
  for (int64_t capacity : args.capacities) {
    CachePolicyOptions options;
    options.capacity = capacity;
    options.record_changes = false;
    options.seed = args.seed;
    if (args.victim_sample > 0) options.sample = args.victim_sample;
    if (args.halve_every > 0) options.reset_period = args.halve_every * capacity;
    CachePolicy policy(options);
    const PolicyRun run = RunPolicy(policy, all);
    const int64_t belady = BeladyHits(all, capacity), oracle = StaticOracleHits(all, capacity);
    // A restart halfway: the second half cold, and warm from the snapshot the first half left.
    CachePolicy before(options), cold(options), warm(options);
    RunPolicy(before, first);
    HotKeys snapshot = before.Snapshot();
    if (!args.snapshot_path.empty()) {
      if (Status s = SaveHotness(args.snapshot_path, {}, snapshot); !s.ok()) {
        std::fprintf(stderr, "rankd bench cache: %s\n", s.ToString().c_str());
        return 2;
      }
      auto loaded = LoadHotness(args.snapshot_path);
      if (!loaded.ok()) {
        std::fprintf(stderr, "rankd bench cache: %s\n", loaded.status().ToString().c_str());
        return 2;
      }
      snapshot = std::move(loaded->keys);
    }
    warm.WarmStart(snapshot);
    const int64_t cold_hits = RunPolicy(cold, second).hits, warm_hits = RunPolicy(warm, second).hits;
    const double p = Ratio(run.hits, all.size()), b = Ratio(belady, all.size()), o = Ratio(oracle, all.size());
    std::printf("%10lld  %8.4f  %8.4f  %8.4f  %8.3f  %12.4f  %12.4f  %9.1f\n", static_cast<long long>(capacity), p, b,
                o, b > 0 ? p / b : 0, Ratio(cold_hits, second.size()), Ratio(warm_hits, second.size()),
                run.ns_per_access);
    nlohmann::json result = {{"capacity", capacity},
                             {"policy_hit_ratio", p},
                             {"belady_hit_ratio", b},
                             {"static_oracle_hit_ratio", o},
                             {"second_half_cold_hit_ratio", Ratio(cold_hits, second.size())},
                             {"second_half_warm_hit_ratio", Ratio(warm_hits, second.size())},
                             {"ns_per_access", run.ns_per_access}};
    if (t.drift_every > 0) {
      const Recovery r = MeasureRecovery(options, all, t.drift_every);
      std::printf(
          "%10s  after %lld moves of the hot set, %lld back to 90%% of the stretch's static oracle within "
          "%lld accesses (median), %lld at most\n",
          "", static_cast<long long>(r.moves), static_cast<long long>(r.recovered), static_cast<long long>(r.median),
          static_cast<long long>(r.most));
      result["moves"] = r.moves;
      result["recovered"] = r.recovered;
      result["recovery_accesses_median"] = r.median;
      result["recovery_accesses_max"] = r.most;
    }
    out["results"].push_back(std::move(result));
  }
  if (!args.json_path.empty()) std::ofstream(args.json_path) << out.dump(1) << "\n";
  return 0;
}

}  // namespace rankd
