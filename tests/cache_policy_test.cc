// The GPU cache's policy and the simulator's parts (embedding/): the frequency sketch, the
// admission and eviction policy, its bounds (Belady's optimum checked against exhaustive search),
// the hotness snapshot's file, and the Zipf traces.
#include "embedding/cache_policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <unordered_map>

#include "embedding/access_trace.h"
#include "embedding/cache_bounds.h"
#include "embedding/hotness_snapshot.h"
#include "embedding/slot_index.h"
#include "test_util.h"

namespace rankd {
namespace {

TEST(FrequencySketch, NeverUndercountsAndHalvesWithAge) {
  FrequencySketch sketch(1024, 1'000'000);
  std::map<uint64_t, int> truth;
  std::mt19937_64 rng(5);
  for (uint64_t key = 0; key < 2000; ++key) {
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) sketch.Add(key * 7919);
    truth[key * 7919] = n;
  }
  double over = 0;
  for (const auto& [key, n] : truth) {
    ASSERT_GE(sketch.Estimate(key), n);
    over += sketch.Estimate(key) - n;
  }
  // 39,000 increments over 1,024 counters a row: a lone row's counter would carry ~38 of others'.
  EXPECT_LT(over / static_cast<double>(truth.size()), 8.0);
  // A key never added reads only others' collisions: the least of four counters that carry ~38
  // increments each, under half the added keys' mean count (19.5).
  double unseen = 0;
  for (uint64_t k = 1; k <= 1000; ++k) unseen += sketch.Estimate(k << 40);
  EXPECT_LT(unseen / 1000, 9.75);
  sketch.Halve();
  for (const auto& [key, n] : truth) ASSERT_GE(sketch.Estimate(key), n / 2);
  EXPECT_EQ(FrequencySketch(1024).Estimate(uint64_t{1} << 60), 0);

  FrequencySketch aging(64, 100);  // halves every 100 increments
  for (int i = 0; i < 99; ++i) aging.Add(42);
  EXPECT_EQ(aging.Estimate(42), 99);
  aging.Add(42);
  EXPECT_EQ(aging.Estimate(42), 50);
  aging.Raise(44, 77);
  EXPECT_EQ(aging.Estimate(44), 77);
  FrequencySketch saturating(64, 1'000'000);
  for (int i = 0; i < 1000; ++i) saturating.Add(43);
  EXPECT_EQ(saturating.Estimate(43), 255);
  saturating.Halve();
  EXPECT_EQ(saturating.Estimate(43), 127);
}

TEST(SlotIndex, AgreesWithAMapThroughInsertionsAndErasures) {
  // A small index (64 entries for a capacity of 32) kept near full, so that runs wrap around the
  // array's end and erasures shift entries back across it.
  SlotIndex index(32);
  std::unordered_map<uint64_t, int64_t> truth;
  std::mt19937_64 rng(11);
  for (int step = 0; step < 200'000; ++step) {
    const uint64_t key = rng() % 100 * 0x10001;  // few distinct keys: many hits, many repeats
    if (truth.count(key)) {
      ASSERT_EQ(index.Find(key), truth[key]);
      if (rng() % 2) index.Erase(key), truth.erase(key);
    } else {
      ASSERT_EQ(index.Find(key), -1);
      index.Erase(key);  // absent: nothing happens
      if (truth.size() < 32) index.Insert(key, step), truth[key] = step;
    }
    ASSERT_EQ(index.size(), static_cast<int64_t>(truth.size()));
  }
  for (const auto& [key, slot] : truth) EXPECT_EQ(index.Find(key), slot);
}

// The fewest misses any cache could have, by trying every choice (tiny traces only).
int64_t ExhaustiveBestHits(const std::vector<uint64_t>& trace, size_t capacity) {
  std::function<int64_t(size_t, std::set<uint64_t>)> best = [&](size_t i, std::set<uint64_t> cached) -> int64_t {
    if (i == trace.size()) return 0;
    const uint64_t key = trace[i];
    if (cached.count(key)) return 1 + best(i + 1, cached);
    int64_t most = best(i + 1, cached);  // bypass
    if (cached.size() < capacity) {
      auto with = cached;
      with.insert(key);
      most = std::max(most, best(i + 1, with));
    } else {
      for (uint64_t victim : cached) {
        auto with = cached;
        with.erase(victim);
        with.insert(key);
        most = std::max(most, best(i + 1, with));
      }
    }
    return most;
  };
  return best(0, {});
}

TEST(CacheBounds, BeladyIsTheOptimumAndTheOracleTheTopCounts) {
  EXPECT_EQ(BeladyHits(std::vector<uint64_t>{1, 2, 3, 1, 2, 3}, 2), 2);  // LRU: 0
  EXPECT_EQ(BeladyHits(std::vector<uint64_t>{1, 1, 1}, 0), 0);
  std::mt19937_64 rng(9);
  for (int round = 0; round < 60; ++round) {
    std::vector<uint64_t> trace(10 + rng() % 3);
    for (uint64_t& key : trace) key = rng() % 5;
    const int64_t capacity = 1 + static_cast<int64_t>(rng() % 3);
    ASSERT_EQ(BeladyHits(trace, capacity), ExhaustiveBestHits(trace, static_cast<size_t>(capacity)))
        << "round " << round;
  }
  const std::vector<uint64_t> counted = {7, 7, 7, 7, 7, 8, 8, 8, 9};
  EXPECT_EQ(StaticOracleHits(counted, 2), 8);
  EXPECT_EQ(StaticOracleHits(counted, 10), 9);
  EXPECT_EQ(StaticOracleHits(counted, 0), 0);
}

TEST(CachePolicy, HotRowsOutlastAScanAndChangesDescribeTheSlots) {
  CachePolicyOptions options;
  options.capacity = 100;
  CachePolicy policy(options);
  std::unordered_map<int64_t, uint64_t> device;  // slot -> key, as the device side applies changes
  auto apply = [&] {
    for (const CachePolicy::Change& c : policy.TakeChanges()) {
      ASSERT_GE(c.slot, 0);
      ASSERT_LT(c.slot, 100);
      auto it = device.find(c.slot);
      if (c.evicted) {
        ASSERT_NE(it, device.end());
        ASSERT_EQ(it->second, *c.evicted);
      } else {
        ASSERT_EQ(it, device.end()) << "an insertion without eviction into a taken slot";
      }
      device[c.slot] = c.key;
    }
  };
  for (int round = 0; round < 20; ++round) {
    for (uint64_t key = 0; key < 100; ++key) EXPECT_EQ(policy.Access(key), round > 0);
  }
  apply();
  // A scan of 20 times the capacity, each key seen once, fills the sketch with noise (and a halving
  // falls inside it), yet nearly every hot row stays: LRU would keep none.
  for (uint64_t key = 1000; key < 3000; ++key) EXPECT_FALSE(policy.Access(key));
  apply();
  int hot_kept = 0;
  for (uint64_t key = 0; key < 100; ++key) hot_kept += policy.Contains(key);
  EXPECT_GE(hot_kept, 97);
  // Keys seen often enough displace the least frequent.
  for (int round = 0; round < 40; ++round) {
    for (uint64_t key = 5000; key < 5010; ++key) policy.Access(key);
  }
  apply();
  for (uint64_t key = 5000; key < 5010; ++key) EXPECT_TRUE(policy.Contains(key)) << key;
  EXPECT_EQ(policy.size(), 100);
  ASSERT_EQ(device.size(), 100u);
  for (const auto& [slot, key] : device) EXPECT_TRUE(policy.Contains(key)) << key;
}

// The policy's bookkeeping stays under a fifth of a 256-byte row a slot (W1 mlperf's bf16 rows), so
// that a host cache of such rows holds at most 1.2 times their bytes.
TEST(CachePolicy, TakesUnderAFifthOfA256ByteRowASlot) {
  for (int64_t capacity : {int64_t{100'000}, int64_t{1'000'003}}) {
    CachePolicyOptions options;
    options.capacity = capacity;
    const CachePolicy policy(options);
    const double per_slot = static_cast<double>(policy.bytes()) / static_cast<double>(capacity);
    EXPECT_LE(per_slot, static_cast<double>(CachePolicy::kBytesPerSlot) + 1) << capacity;
    EXPECT_LE(per_slot, 0.2 * 256) << capacity;
  }
}

TEST(CachePolicy, StaysNearBeladyOnZipfTracesAndFollowsADrift) {
  for (int64_t drift : {int64_t{0}, int64_t{100'000}}) {
    TraceOptions t;
    t.rows = 200'000;
    t.accesses = 600'000;
    t.drift_every = drift;
    t.drift_rows = 5'000;
    const std::vector<uint64_t> trace = MakeTrace(t);
    CachePolicyOptions options;
    options.capacity = 5'000;
    options.record_changes = false;
    CachePolicy policy(options);
    int64_t hits = 0, late_hits = 0;
    for (size_t i = 0; i < trace.size(); ++i) {
      const bool hit = policy.Access(trace[i]);
      hits += hit;
      late_hits += hit && i >= trace.size() - 50'000;
    }
    const int64_t belady = BeladyHits(trace, 5'000), oracle = StaticOracleHits(trace, 5'000);
    EXPECT_LE(hits, belady);
    EXPECT_GE(static_cast<double>(hits), 0.85 * static_cast<double>(belady)) << "drift " << drift;
    if (drift == 0) {
      EXPECT_GE(static_cast<double>(hits), 0.9 * static_cast<double>(oracle));
    } else {
      // Five moves of the hot set: a static hot set falls behind, the policy keeps up.
      EXPECT_GT(hits, oracle) << "drift " << drift;
      EXPECT_GT(static_cast<double>(late_hits) / 50'000, 0.6);
    }
  }
}

TEST(CachePolicy, SnapshotsAndWarmStartsThroughTheFile) {
  CachePolicyOptions options;
  options.capacity = 50;
  CachePolicy policy(options);
  for (uint64_t key = 0; key < 50; ++key) {
    for (uint64_t i = 0; i <= key % 7; ++i) policy.Access(key);
  }
  HotKeys hot = policy.Snapshot();
  ASSERT_EQ(hot.size(), 50u);
  for (size_t i = 1; i < hot.size(); ++i) EXPECT_GE(hot[i - 1].second, hot[i].second);
  const std::string path = testing::WriteTempFile("hotness/snapshot.bin", "");
  const std::vector<std::string> names = {"t0", "t1"};
  ASSERT_TRUE(SaveHotness(path, names, hot).ok());
  auto loaded = LoadHotness(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->tables, names);
  EXPECT_EQ(loaded->keys, hot);

  CachePolicy warm(options);
  warm.WarmStart(loaded->keys);
  EXPECT_EQ(warm.size(), 50);
  for (uint64_t key = 0; key < 50; ++key) EXPECT_TRUE(warm.Contains(key));
  EXPECT_EQ(warm.TakeChanges().size(), 50u);  // the device side loads the warm rows too
  EXPECT_TRUE(warm.Access(3));

  // A snapshot written and read a block at a time: 200,000 keys (1.8 MB) cross the blocks' edges.
  HotKeys many;
  for (uint64_t key = 0; key < 200000; ++key) many.emplace_back(key * 2654435761u, static_cast<int>(255 - key % 256));
  ASSERT_TRUE(SaveHotness(path, names, many).ok());
  auto many_loaded = LoadHotness(path);
  ASSERT_TRUE(many_loaded.ok()) << many_loaded.status().ToString();
  EXPECT_EQ(many_loaded->keys, many);
  ASSERT_TRUE(SaveHotness(path, names, hot).ok());

  EXPECT_EQ(LoadHotness(path + ".absent").status().code(), StatusCode::kNotFound);
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  std::string huge_table_count = bytes, long_name = bytes;
  huge_table_count[15] = '\x7f';  // the table count's top byte
  long_name[17] = '\x7f';         // the first name's length: past the file
  for (const std::string& bad : {std::string("RKDHOT3\n") + bytes.substr(8), bytes.substr(0, bytes.size() - 1),
                                 bytes + "x", bytes.substr(0, 10), bytes.substr(0, 20), huge_table_count, long_name}) {
    const std::string bad_path = testing::WriteTempFile("hotness/bad.bin", bad);
    EXPECT_EQ(LoadHotness(bad_path).status().code(), StatusCode::kInvalidArgument);
  }
}

// A policy adopting a cache's rows takes each in its slot, up to the first empty one, with no change
// queued; the next miss fills the next slot.
TEST(CachePolicy, AdoptsTheRowsACacheHoldsInTheirSlots) {
  CachePolicyOptions options;
  options.capacity = 6;
  CachePolicy policy(options);
  const std::vector<int64_t> slots = {40, 41, 42, -1, 44, -1};
  policy.Adopt(slots);
  EXPECT_EQ(policy.size(), 3);
  EXPECT_FALSE(policy.has_changes());
  for (int64_t s = 0; s < 3; ++s) EXPECT_EQ(policy.SlotOf(static_cast<uint64_t>(slots[s])), s);
  EXPECT_FALSE(policy.Contains(44));  // past the first empty slot: left to be filled again
  EXPECT_TRUE(policy.Access(41));
  EXPECT_FALSE(policy.Access(7));
  const std::vector<CachePolicy::Change> changes = policy.TakeChanges();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].key, 7u);
  EXPECT_EQ(changes[0].slot, 3);
  policy.Adopt(slots);  // only into an empty policy
  EXPECT_EQ(policy.size(), 4);
}

// Keys follow their table's name to its place in the loading model; a version-1 file (no names)
// keeps its keys as saved.
TEST(CachePolicy, SnapshotKeysFollowTheirTablesNames) {
  HotnessSnapshot saved;
  saved.tables = {"x", "y"};
  saved.keys = {{RowKey(0, 5), 9}, {RowKey(1, 6), 8}, {RowKey(2, 7), 7}, {RowKey(0, 8), 6}};
  EXPECT_EQ(RekeyHotness(saved, std::vector<std::string>{"y", "z", "x"}),
            (HotKeys{{RowKey(2, 5), 9}, {RowKey(0, 6), 8}, {RowKey(2, 8), 6}}));
  EXPECT_EQ(RekeyHotness(saved, std::vector<std::string>{"z"}), HotKeys{});

  std::string v1("RKDHOT1\n");
  const HotKeys keys = {{RowKey(3, 1), 200}, {RowKey(0, 2), 100}};
  auto put = [&v1](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) v1.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(keys.size(), 8);
  for (const auto& [key, count] : keys) put(key, 8), put(static_cast<uint64_t>(count), 1);
  auto loaded = LoadHotness(testing::WriteTempFile("hotness/v1.bin", v1));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_TRUE(loaded->tables.empty());
  EXPECT_EQ(loaded->keys, keys);
  EXPECT_EQ(RekeyHotness(*loaded, std::vector<std::string>{"a"}), keys);
}

TEST(AccessTrace, ZipfFrequenciesFollowTheLawAndDriftMovesTheHotRows) {
  for (double s : {0.8, 1.0, 1.2}) {
    ZipfSampler zipf(1000, s);
    std::mt19937_64 rng(4);
    std::vector<int64_t> counts(1001, 0);
    const int draws = 400'000;
    for (int i = 0; i < draws; ++i) {
      const int64_t r = zipf(rng);
      ASSERT_GE(r, 1);
      ASSERT_LE(r, 1000);
      ++counts[static_cast<size_t>(r)];
    }
    double norm = 0;
    for (int r = 1; r <= 1000; ++r) norm += std::pow(r, -s);
    for (int r : {1, 2, 5, 50}) {
      const double want = std::pow(r, -s) / norm * draws;
      EXPECT_NEAR(static_cast<double>(counts[static_cast<size_t>(r)]), want, 5 * std::sqrt(want) + 0.01 * want)
          << "s " << s << " rank " << r;
    }
  }
  TraceOptions t;
  t.rows = 1000;
  t.accesses = 20'000;
  t.drift_every = 10'000;
  t.drift_rows = 500;
  const std::vector<uint64_t> trace = MakeTrace(t);
  std::map<uint64_t, int> before, after;
  for (size_t i = 0; i < 10'000; ++i) ++before[trace[i]];
  for (size_t i = 10'000; i < trace.size(); ++i) ++after[trace[i]];
  auto hottest = [](const std::map<uint64_t, int>& counts) {
    return std::max_element(counts.begin(), counts.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  };
  EXPECT_NE(hottest(before), hottest(after));
  EXPECT_LT(after[hottest(before)], before[hottest(before)] / 10);
  for (uint64_t row : trace) ASSERT_LT(row, 1000u);
}

}  // namespace
}  // namespace rankd
