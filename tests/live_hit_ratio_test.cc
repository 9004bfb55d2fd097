// The live hit ratio against the simulator's (issue 55): a cached table's keeper
// (embedding/cache_keeper.h) fed a replayed trace of requests, on a stationary and a drifting Zipf
// trace, seeing every lookup, a quarter or a sixteenth of them. What it reports
// (rankd_table_cache_hits over rankd_table_cache_lookups in /metrics) is what the device side's
// cache held for the requests' lookups, and that is within 0.02 of the cache simulator's hit ratio
// for the same requests (`rankd inspect --requests`: embedding/lookup_replay.h, CachePolicy fed
// the lookups the keeper samples). A policy fed every lookup is printed beside them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "backend/table_cache.h"
#include "embedding/access_trace.h"
#include "embedding/cache_keeper.h"
#include "embedding/cache_policy.h"
#include "embedding/lookup_replay.h"
#include "test_util.h"

namespace rankd {
namespace {

constexpr int64_t kRows = 10000;  // the cached table's
constexpr int64_t kBagIds = 4;    // ids a candidate's bag reads
constexpr int64_t kCandidates = 64;

// A device side that holds what it is given.
class HeldCache : public TableCache {
 public:
  explicit HeldCache(int64_t capacity) : slots_(static_cast<size_t>(capacity), -1) {}
  int64_t capacity() const override { return static_cast<int64_t>(slots_.size()); }
  Status Apply(std::span<const Fill> fills, uint64_t /*claim*/) override {
    for (const Fill& f : fills) slots_[static_cast<size_t>(f.slot)] = f.row;
    return Status::Ok();
  }
  std::span<const int64_t> rows_of_slots() const override { return slots_; }

 private:
  std::vector<int64_t> slots_;
};

// One bag per candidate over the cached table, read by [candidates, kBagIds] ids.
Graph BagGraph(int& table) {
  testing::GraphBuilder g;
  std::mt19937_64 rng(5);
  table = g.Const("table", testing::RandomTable(DType::kF32, kRows, 4, rng));
  g.Output(g.Op("EmbeddingBag", {table, g.Input("ids", DType::kI64, {-1, kBagIds})}));
  return g.graph();
}

struct Ratios {
  double device = 0;     // lookups that found their row in the device's cache when their request ran
  double reported = 0;   // the keeper's sampled lookups that found their row cached (/metrics)
  double simulated = 0;  // the simulator's, sampling as the keeper does
  double every = 0;      // a policy fed every lookup
  uint64_t lookups = 0;  // the keeper's sampled lookups
};

// Replays `trace` as requests of kCandidates candidates, one at a time (each offered and taken
// before the next, as a keeper that keeps up takes them), to a keeper of a `capacity`-row cache
// that copies at most `sample_ids` ids a request; and runs the simulator over the same lookups.
Ratios Replay(const std::vector<uint64_t>& trace, int64_t capacity, int64_t sample_ids) {
  int table = -1;
  const Graph graph = BagGraph(table);
  HeldCache cache(capacity);
  CacheKeeperOptions options;
  options.sample_ids = sample_ids;
  options.idle_priority = false;
  CacheKeeper keeper(graph, {{table, &cache}}, options);
  CachePolicyOptions every;
  every.capacity = capacity;
  every.record_changes = false;
  CachePolicy policy(every);
  LookupReplay simulator(graph, FindTables(graph), sample_ids);
  uint64_t every_hits = 0, device_hits = 0;
  const size_t per_request = static_cast<size_t>(kCandidates * kBagIds);
  for (size_t at = 0; at + per_request <= trace.size(); at += per_request) {
    std::vector<int64_t> ids(trace.begin() + static_cast<std::ptrdiff_t>(at),
                             trace.begin() + static_cast<std::ptrdiff_t>(at + per_request));
    for (int64_t id : ids) every_hits += policy.Access(RowKey(0, id)) ? 1 : 0;
    const std::set<int64_t> held(cache.rows_of_slots().begin(), cache.rows_of_slots().end());
    for (int64_t id : ids) device_hits += held.count(id);
    const std::vector<Tensor> inputs{Tensor::FromVector(DType::kI64, {kCandidates, kBagIds}, ids)};
    EXPECT_TRUE(simulator.Add(inputs).ok());
    keeper.Offer(inputs);
    EXPECT_TRUE(keeper.Flush().ok());
  }
  const TableCacheStats stats = keeper.stats().at(0);
  EXPECT_EQ(stats.dropped_offers, 0u);
  Ratios r;
  r.lookups = stats.lookups;
  const auto replayed = static_cast<double>(trace.size() / per_request * per_request);
  r.device = static_cast<double>(device_hits) / replayed;
  r.reported = static_cast<double>(stats.hits) / static_cast<double>(stats.lookups);
  r.simulated = simulator.ServedHitRatio(capacity);
  r.every = static_cast<double>(every_hits) / replayed;
  EXPECT_EQ(simulator.all().size(), static_cast<size_t>(replayed));
  EXPECT_EQ(simulator.seen().size(), stats.lookups);
  return r;
}

TEST(LiveHitRatio, TheKeepersHitRatioIsTheSimulatorsOnTheSameTrace) {
  const int64_t accesses = 2000 * kCandidates * kBagIds;  // 400 requests
  for (const bool drifting : {false, true}) {
    TraceOptions t;
    t.rows = kRows;
    t.zipf = 1.05;
    t.accesses = accesses;
    t.seed = 7;
    if (drifting) {
      t.drift_every = accesses / 5;
      t.drift_rows = 500;
    }
    const std::vector<uint64_t> trace = MakeTrace(t);
    for (const int64_t capacity : {kRows / 100, kRows / 10}) {
      // Every lookup, then a quarter and a sixteenth of them (every 4th and 16th candidate).
      for (const int64_t sample_ids : {int64_t{1} << 18, kCandidates * kBagIds / 4, kCandidates * kBagIds / 16}) {
        const Ratios r = Replay(trace, capacity, sample_ids);
        const std::string what = std::string(drifting ? "drifting" : "stationary") + ", " + std::to_string(capacity) +
                                 " rows cached, " + std::to_string(r.lookups) + " lookups seen: device " +
                                 std::to_string(r.device) + ", reported " + std::to_string(r.reported) +
                                 ", simulated " + std::to_string(r.simulated) + ", every lookup " +
                                 std::to_string(r.every);
        SCOPED_TRACE(what);
        EXPECT_EQ(r.lookups, static_cast<uint64_t>(accesses * std::min<int64_t>(sample_ids, 256) / 256));
        EXPECT_GT(r.simulated, 0.1);  // a cache that holds something: the comparison means something
        // What /metrics reports is what the device's lookups found, sampled or not.
        EXPECT_LE(std::fabs(r.reported - r.device), 0.005);
        // The cache is the simulator's, sampled or not. A sampling keeper's policy counts and ages
        // in sampled lookups: it warms and follows a moving hot set more slowly than one fed every
        // lookup (docs/embedding.md, "The live hit ratio"), and the simulator samples as it does.
        EXPECT_LE(std::fabs(r.device - r.simulated), 0.02);
        if (sample_ids >= kCandidates * kBagIds) {
          EXPECT_LE(std::fabs(r.device - r.every), 0.02);
        }
        std::printf("  %s\n", what.c_str());
      }
    }
  }
}

}  // namespace
}  // namespace rankd
