// Tables cached on the GPU (embedding/cache_keeper.h, backend/cuda/row_cache.h): the keeper moves
// the rows its policy picks into the caches, and a model whose tables are cached scores exactly as
// with every table on the device, whatever the cache holds and while it changes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <latch>
#include <random>
#include <set>

#include "compile/evaluate.h"
#include "embedding/cache_keeper.h"
#include "embedding/hotness_snapshot.h"
#include "embedding/lookup_trace.h"
#include "frontend/kserve_json.h"
#include "model/config.h"
#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::GraphBuilder;

// A TableCache that records what it is given, as the device side would hold it.
class RecordingCache : public TableCache {
 public:
  RecordingCache(int64_t capacity, int64_t rows) : rows_(rows), slots_(static_cast<size_t>(capacity), -1) {}
  int64_t capacity() const override { return static_cast<int64_t>(slots_.size()); }
  uint64_t Claim() override {
    MutexLock lock(mu_);
    return claims_.Claim();
  }
  void Release(uint64_t claim) override {
    MutexLock lock(mu_);
    claims_.Release(claim);
  }
  bool Claimed(uint64_t claim) const override {
    MutexLock lock(mu_);
    return claims_.Decides(claim);
  }
  Status Apply(std::span<const Fill> fills, uint64_t claim) override {
    if (gate) gate->wait();
    MutexLock lock(mu_);
    if (!claims_.Decides(claim)) return Status::Ok();
    ++applies;
    for (const Fill& f : fills) {
      if (f.slot < 0 || f.slot >= capacity() || f.row < 0 || f.row >= rows_) return InvalidArgument("bad fill");
      slots_[static_cast<size_t>(f.slot)] = f.row;
    }
    return fail ? Internal("the device is gone") : Status::Ok();
  }
  std::span<const int64_t> rows_of_slots() const override { return slots_; }

  std::latch* gate = nullptr;  // Apply waits for it when set
  bool fail = false;
  std::atomic<int> applies{0};  // Applies that changed the slots

 private:
  int64_t rows_;
  std::vector<int64_t> slots_;
  mutable Mutex mu_;
  CacheClaims claims_ RANKD_GUARDED_BY(mu_);
};

// A bag over a 1,000-row table read by [batch, 4] ids, and a second table left uncached.
struct BagModel {
  Graph graph;
  int cached = -1, other = -1;
  BagModel() {
    GraphBuilder g;
    std::mt19937_64 rng(5);
    cached = g.Const("cached", testing::RandomTable(DType::kF32, 1000, 4, rng));
    other = g.Const("other", testing::RandomTable(DType::kF32, 10, 4, rng));
    const int ids = g.Input("ids", DType::kI64, {-1, 4});
    const int more = g.Input("more", DType::kI64, {-1, 2});
    g.Output(g.Op("Add", {g.Op("EmbeddingBag", {cached, ids}), g.Op("EmbeddingBag", {other, more})}));
    graph = g.graph();
  }
};

std::vector<Tensor> Inputs(const std::vector<int64_t>& ids) {
  const auto batch = static_cast<int64_t>(ids.size() / 4);
  return {Tensor::FromVector(DType::kI64, {batch, 4}, ids), Tensor::Zeros(DType::kI64, {batch, 2})};
}

// The rows looked up most often end up cached, in the slots the keeper filled; a row never looked up
// is never cached; the counts add up.
TEST(CacheKeeper, CachesTheHotRowsItIsOffered) {
  BagModel m;
  RecordingCache cache(4, 1000);
  CacheKeeper keeper(m.graph, {{m.cached, &cache}});
  std::mt19937_64 rng(3);
  uint64_t offered = 0;
  for (int round = 0; round < 200; ++round) {
    std::vector<int64_t> ids;
    for (int i = 0; i < 8; ++i) {
      ids.push_back(7), ids.push_back(11), ids.push_back(500);  // hot
      ids.push_back(static_cast<int64_t>(rng() % 1000));        // cold
    }
    offered += ids.size();
    keeper.Offer(Inputs(ids));
    ASSERT_TRUE(keeper.Flush().ok());  // one offer at a time: none dropped
  }
  std::set<int64_t> held(cache.rows_of_slots().begin(), cache.rows_of_slots().end());
  for (int64_t hot : {7, 11, 500}) EXPECT_TRUE(held.count(hot)) << hot;
  std::vector<TableCacheStats> stats = keeper.stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].table, "cached");
  EXPECT_EQ(stats[0].capacity, 4);
  EXPECT_EQ(stats[0].cached, 4);
  EXPECT_EQ(stats[0].lookups, offered);
  EXPECT_GT(stats[0].hits, offered * 7 / 10);  // the hot three are 3/4 of the lookups
  EXPECT_GE(stats[0].inserted, 4u);
  EXPECT_EQ(stats[0].inserted - stats[0].evicted, 4u);
  EXPECT_EQ(stats[0].dropped_offers, 0u);
}

// A cache with room for every row holds all of them from the start, and nothing changes after.
TEST(CacheKeeper, FillsACacheAsLargeAsItsTable) {
  BagModel m;
  RecordingCache cache(1000, 1000);
  CacheKeeper keeper(m.graph, {{m.cached, &cache}});
  ASSERT_TRUE(keeper.Flush().ok());
  std::set<int64_t> held(cache.rows_of_slots().begin(), cache.rows_of_slots().end());
  EXPECT_EQ(held.size(), 1000u);
  EXPECT_EQ(*held.begin(), 0);
  EXPECT_EQ(*held.rbegin(), 999);
  EXPECT_EQ(cache.applies.load(), 1);
  keeper.Offer(Inputs({1, 2, 3, 4, 999, 998, 5, 6}));
  ASSERT_TRUE(keeper.Flush().ok());
  EXPECT_EQ(cache.applies.load(), 1);
  EXPECT_EQ(keeper.stats()[0].cached, 1000);
  EXPECT_EQ(keeper.stats()[0].hits, 8u);
}

// The rows a keeper held are saved when it stops, and the next keeper of the same tables starts
// with them cached before any offer; rows saved under other tables' names and a snapshot that is
// not one leave the caches cold.
TEST(CacheKeeper, StartsWarmFromTheSnapshotThePreviousOneSaved) {
  BagModel m;
  const std::string path = testing::WriteTempFile("hotness/keeper.snapshot", "");
  std::filesystem::remove(path);
  CacheKeeperOptions options;
  options.snapshot_path = path;
  {
    RecordingCache cache(3, 1000);
    CacheKeeper keeper(m.graph, {{m.cached, &cache}}, options);
    for (int round = 0; round < 20; ++round) {
      keeper.Offer(Inputs({42, 43, 44, 42, 43, 44, 42, 43}));
      ASSERT_TRUE(keeper.Flush().ok());
    }
  }
  ASSERT_TRUE(std::filesystem::exists(path));
  RecordingCache warm(3, 1000);
  {
    CacheKeeper keeper(m.graph, {{m.cached, &warm}}, options);
    ASSERT_TRUE(keeper.Flush().ok());
    std::set<int64_t> held(warm.rows_of_slots().begin(), warm.rows_of_slots().end());
    EXPECT_EQ(held, (std::set<int64_t>{42, 43, 44}));
    EXPECT_EQ(keeper.stats()[0].cached, 3);
    keeper.Offer(Inputs({42, 43, 44, 42}));
    ASSERT_TRUE(keeper.Flush().ok());
    EXPECT_EQ(keeper.stats()[0].hits, 4u);  // warm: every lookup hits at once
  }
  // The snapshot names the tables its keys index; rows saved under another table's name are not
  // this table's.
  auto saved = LoadHotness(path);
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  const std::string& name = m.graph.values[static_cast<size_t>(m.cached)].name;
  EXPECT_NE(std::find(saved->tables.begin(), saved->tables.end(), name), saved->tables.end()) << name;
  std::vector<std::string> renamed = saved->tables;
  for (std::string& n : renamed) n += ".other";
  ASSERT_TRUE(SaveHotness(path, renamed, saved->keys).ok());
  {
    RecordingCache other(3, 1000);
    CacheKeeper keeper(m.graph, {{m.cached, &other}}, options);
    ASSERT_TRUE(keeper.Flush().ok());
    EXPECT_EQ(keeper.stats()[0].cached, 0);
  }
  std::ofstream(path, std::ios::binary) << "not a snapshot";
  RecordingCache cold(3, 1000);
  CacheKeeper keeper(m.graph, {{m.cached, &cold}}, options);
  ASSERT_TRUE(keeper.Flush().ok());
  EXPECT_EQ(keeper.stats()[0].cached, 0);
  EXPECT_EQ(cold.applies.load(), 0);
}

// A version loaded beside the serving one shares its cache (backend/cuda/shared_row_caches.h): the new
// keeper starts from the rows the cache holds, moving none, and decides them from then on; the old
// keeper's offers change nothing, nor does it save the snapshot. Should the new version go (its load
// failed), the old keeper decides again, from the rows the cache then holds.
TEST(CacheKeeper, ANewVersionsKeeperTakesOverTheCacheItShares) {
  BagModel m;
  RecordingCache cache(3, 1000);
  auto held = [&cache] { return std::set<int64_t>(cache.rows_of_slots().begin(), cache.rows_of_slots().end()); };
  auto offer = [](CacheKeeper& keeper, const std::vector<int64_t>& ids, int rounds) {
    for (int round = 0; round < rounds; ++round) {
      keeper.Offer(Inputs(ids));
      ASSERT_TRUE(keeper.Flush().ok());
    }
  };
  const std::string path = testing::WriteTempFile("hotness/shared.snapshot", "");
  std::filesystem::remove(path);
  CacheKeeperOptions options;
  options.snapshot_path = path;
  CacheKeeper old_keeper(m.graph, {{m.cached, &cache}}, options);
  offer(old_keeper, {42, 43, 44, 42, 43, 44, 42, 43}, 20);
  ASSERT_EQ(held(), (std::set<int64_t>{42, 43, 44}));
  const int applies = cache.applies.load();
  {
    CacheKeeper new_keeper(m.graph, {{m.cached, &cache}});
    ASSERT_TRUE(new_keeper.Flush().ok());
    EXPECT_EQ(new_keeper.stats()[0].cached, 3);  // the rows it found
    EXPECT_EQ(cache.applies.load(), applies);    // none moved
    offer(new_keeper, {42, 43, 44, 42}, 1);
    EXPECT_EQ(new_keeper.stats()[0].hits, 4u);  // warm at once

    offer(old_keeper, {7, 8, 9, 7, 8, 9, 7, 8}, 20);
    EXPECT_EQ(held(), (std::set<int64_t>{42, 43, 44}));  // the old keeper changes nothing
    EXPECT_EQ(cache.applies.load(), applies);
    offer(new_keeper, {5, 6, 5, 6, 5, 6, 5, 6}, 20);
    EXPECT_TRUE(held().count(5) && held().count(6));  // the new one decides
  }
  EXPECT_FALSE(std::filesystem::exists(path));  // the old keeper never saved while it did not decide
  offer(old_keeper, {7, 8, 9, 7, 8, 9, 7, 8}, 20);
  EXPECT_EQ(held(), (std::set<int64_t>{7, 8, 9}));  // it decides again, from what the cache held
}

// A keeper that is behind drops offers instead of queueing them without bound or making the run
// wait; an error from the device side is reported by Flush, once.
TEST(CacheKeeper, DropsOffersWhenBehindAndReportsDeviceErrors) {
  BagModel m;
  RecordingCache cache(2, 1000);
  std::latch gate(1);
  cache.gate = &gate;
  CacheKeeperOptions options;
  options.max_pending = 2;
  CacheKeeper keeper(m.graph, {{m.cached, &cache}}, options);
  for (int i = 0; i < 10; ++i) keeper.Offer(Inputs({1, 2, 3, 4}));  // the first blocks in Apply
  gate.count_down();
  ASSERT_TRUE(keeper.Flush().ok());
  EXPECT_GE(keeper.stats()[0].dropped_offers, 7u);
  EXPECT_LE(keeper.stats()[0].dropped_offers, 8u);
  cache.gate = nullptr;
  cache.fail = true;
  keeper.Offer(Inputs({5, 5, 5, 5, 6, 6, 6, 6}));
  Status failed = keeper.Flush();
  EXPECT_EQ(failed.code(), StatusCode::kInternal) << failed.ToString();
  EXPECT_TRUE(keeper.Flush().ok());
}

// A large offer is sampled: at most sample_ids ids, whole rows spread over the batch, are copied
// and traced.
TEST(CacheKeeper, SamplesLargeOffers) {
  BagModel m;
  RecordingCache cache(8, 1000);
  CacheKeeperOptions options;
  options.sample_ids = 400;
  CacheKeeper keeper(m.graph, {{m.cached, &cache}}, options);
  std::vector<int64_t> ids(4 * 10000, 3);
  for (size_t i = 4 * 5000; i < ids.size(); ++i) ids[i] = 9;  // the second half of the batch
  keeper.Offer(Inputs(ids));
  ASSERT_TRUE(keeper.Flush().ok());
  EXPECT_EQ(keeper.stats()[0].lookups, 400u);  // every 100th row of 4
  std::set<int64_t> held(cache.rows_of_slots().begin(), cache.rows_of_slots().end());
  EXPECT_TRUE(held.count(3) && held.count(9)) << "the sample covers both halves";
}

// A bag over a 1,000-row table whose ids the graph computes: the request's ids offset by 5,000,
// then hashed into the table as `ids % 1000` (ONNX Mod) would be.
struct ComputedIdsModel {
  Graph graph;
  int cached = -1;
  ComputedIdsModel() {
    GraphBuilder g;
    std::mt19937_64 rng(5);
    cached = g.Const("cached", testing::RandomTable(DType::kF32, 1000, 4, rng));
    const int raw = g.Input("raw", DType::kI64, {-1, 4});
    const int offset = g.Const("offset", Tensor::FromVector(DType::kI64, {}, std::vector<int64_t>{-5000}));
    const int rows = g.Const("rows", Tensor::FromVector(DType::kI64, {}, std::vector<int64_t>{1000}));
    g.Output(g.Op("EmbeddingBag", {cached, g.Op("Mod", {g.Op("Add", {raw, offset}), rows})}));
    graph = g.graph();
  }
};

// Ids computed from one input are computed again from the sampled input, on the CPU, and traced:
// the hot rows end up cached. Without a way to run a node, such lookups are not traced at all.
TEST(CacheKeeper, TracesIdsTheGraphComputesFromAnInput) {
  ComputedIdsModel m;
  RecordingCache cache(4, 1000), blind(4, 1000);
  CacheKeeperOptions options;
  options.evaluate_node = [](const Node& n, const std::vector<const Tensor*>& in) { return EvaluateNode(n, in); };
  CacheKeeper keeper(m.graph, {{m.cached, &cache}}, options);
  CacheKeeper without(m.graph, {{m.cached, &blind}});
  std::mt19937_64 rng(3);
  uint64_t offered = 0;
  for (int round = 0; round < 100; ++round) {
    std::vector<int64_t> raw;
    for (int i = 0; i < 8; ++i) {
      raw.push_back(5007), raw.push_back(5011), raw.push_back(5500);  // rows 7, 11 and 500: hot
      raw.push_back(5000 + static_cast<int64_t>(rng() % 1000));
    }
    offered += raw.size();
    const std::vector<Tensor> inputs = {Tensor::FromVector(DType::kI64, {8, 4}, raw)};
    keeper.Offer(inputs);
    without.Offer(inputs);
    ASSERT_TRUE(keeper.Flush().ok());
    ASSERT_TRUE(without.Flush().ok());
  }
  std::set<int64_t> held(cache.rows_of_slots().begin(), cache.rows_of_slots().end());
  for (int64_t hot : {7, 11, 500}) EXPECT_TRUE(held.count(hot)) << hot;
  EXPECT_EQ(keeper.stats()[0].lookups, offered);
  EXPECT_EQ(without.stats()[0].lookups, 0u);
  EXPECT_EQ(without.stats()[0].cached, 0);
}

// Computed ids are traced when graph inputs and constants make them (four inputs at most), through
// no lookup.
TEST(LookupTrace, FindsIdsComputedFromInputsNotThroughALookup) {
  GraphBuilder g;
  std::mt19937_64 rng(5);
  const int table = g.Const("table", testing::RandomTable(DType::kF32, 100, 4, rng));
  const int small = g.Const("small", testing::RandomTable(DType::kF32, 10, 1, rng));
  const int a = g.Input("a", DType::kI64, {-1, 2});
  const int b = g.Input("b", DType::kI64, {-1, 2});
  const int ten = g.Const("ten", Tensor::FromVector(DType::kI64, {}, std::vector<int64_t>{10}));
  const int from_a = g.Op("Clip", {g.Op("Add", {a, ten}), ten});  // a alone
  const int from_both = g.Op("Add", {a, b});                      // a cross of two inputs
  const int from_lookup = g.Op("Cast", {g.Op("Gather", {small, b})}, {{"to", AttributeValue(int64_t{7})}});  // not
  // Through a vocabulary's map (a constant table of ids): computed as any other node.
  std::vector<int64_t> map_rows(10);
  for (size_t i = 0; i < map_rows.size(); ++i) map_rows[i] = static_cast<int64_t>(90 - 7 * i);
  const int map = g.Const("vocabulary", Tensor::FromVector(DType::kI64, {10}, map_rows));
  const int from_map = g.Op("Gather", {map, b});
  g.Output(g.Op("Add",
                {g.Op("Add", {g.Op("EmbeddingBag", {table, from_a}), g.Op("EmbeddingBag", {table, from_both})}),
                 g.Op("Add", {g.Op("EmbeddingBag", {table, from_lookup}), g.Op("EmbeddingBag", {table, from_map})})}));
  const Graph graph = g.graph();
  const std::vector<ComputedIds> found = FindComputedIds(graph, {table});
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].value, from_a);
  EXPECT_EQ(found[0].inputs, std::vector<size_t>{0});
  ASSERT_EQ(found[0].nodes.size(), 2u);
  EXPECT_EQ(graph.nodes[found[0].nodes[0]].op, "Add");
  EXPECT_EQ(graph.nodes[found[0].nodes[1]].op, "Clip");
  EXPECT_EQ(found[1].value, from_both);
  EXPECT_EQ(found[1].inputs, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(found[2].value, from_map);
  EXPECT_EQ(found[2].inputs, std::vector<size_t>{1});
  ASSERT_EQ(found[2].nodes.size(), 1u);
  EXPECT_EQ(graph.nodes[found[2].nodes[0]].op, "Gather");
  const std::vector<ComputedIds> short_chains = FindComputedIds(graph, {table}, 1);
  ASSERT_EQ(short_chains.size(), 2u) << "the two nodes of a's chain are more than one";
  EXPECT_EQ(short_chains[0].value, from_both);
  EXPECT_EQ(short_chains[1].value, from_map);

  // The map's rows are what the keeper traces: b's ids mapped, each row of the table they name.
  const std::vector<Tensor> inputs = {Tensor::FromVector(DType::kI64, {2, 2}, std::vector<int64_t>{1, 2, 3, 4}),
                                      Tensor::FromVector(DType::kI64, {2, 2}, std::vector<int64_t>{0, 9, 5, 1})};
  Status error;
  const std::unordered_map<int, Tensor> values = ComputeIdValues(
      graph, std::span<const ComputedIds>(found).subspan(2), inputs,
      [](const Node& n, const std::vector<const Tensor*>& in) { return EvaluateNode(n, in); }, &error);
  ASSERT_TRUE(error.ok()) << error.ToString();
  ASSERT_TRUE(values.count(from_map));
  const Tensor& mapped = values.at(from_map);
  ASSERT_EQ(mapped.size(), 4);
  EXPECT_EQ((std::vector<int64_t>(mapped.data<int64_t>(), mapped.data<int64_t>() + 4)),
            (std::vector<int64_t>{90, 27, 55, 83}));
  std::vector<TableInfo> tables = {TableInfo{}};
  tables[0].value = table;
  tables[0].shape = {100, 4};
  std::vector<uint64_t> trace;
  AppendLookups(graph, tables, inputs, trace, &values);
  for (int64_t row : {90, 27, 55, 83}) {
    EXPECT_EQ(std::count(trace.begin(), trace.end(), RowKey(0, row)), 1) << row;
  }
}

// A cross of two features (a * 100 + b) read by a cached table: the keeper samples both inputs at
// the same rows, computes each row's id as the graph does and caches the hot crossed rows.
TEST(CacheKeeper, TracesIdsCrossedFromTwoInputsAtTheSameRows) {
  GraphBuilder g;
  std::mt19937_64 rng(7);
  const int table = g.Const("crossed", testing::RandomTable(DType::kF32, 10000, 4, rng));
  const int a = g.Input("a", DType::kI64, {-1, 1});
  const int b = g.Input("b", DType::kI64, {-1, 3});  // wider: sampled at a's stride all the same
  const int hundred = g.Const("hundred", Tensor::FromVector(DType::kI64, {}, std::vector<int64_t>{100}));
  g.Output(g.Op("EmbeddingBag", {table, g.Op("Add", {g.Op("Mul", {a, hundred}), b})}));
  const Graph graph = g.graph();
  RecordingCache cache(3, 10000);
  CacheKeeperOptions options;
  options.evaluate_node = [](const Node& n, const std::vector<const Tensor*>& in) { return EvaluateNode(n, in); };
  options.sample_ids = 64;  // a sample of every few rows of each offer
  CacheKeeper keeper(graph, {{table, &cache}}, options);
  constexpr int64_t kRows = 400;
  for (int round = 0; round < 60; ++round) {
    std::vector<int64_t> av, bv;
    for (int64_t r = 0; r < kRows; ++r) {
      // Rows of a = 12 read b = 34 (row 1234); the others, cold rows of other crosses.
      const bool hot = r % 2 == 0;
      av.push_back(hot ? 12 : 50 + static_cast<int64_t>(rng() % 40));
      for (int k = 0; k < 3; ++k) bv.push_back(hot ? 34 : static_cast<int64_t>(rng() % 100));
    }
    keeper.Offer(std::vector<Tensor>{Tensor::FromVector(DType::kI64, {kRows, 1}, av),
                                     Tensor::FromVector(DType::kI64, {kRows, 3}, bv)});
    ASSERT_TRUE(keeper.Flush().ok());
  }
  const std::set<int64_t> held(cache.rows_of_slots().begin(), cache.rows_of_slots().end());
  EXPECT_TRUE(held.count(1234)) << "the hot cross";
  EXPECT_GT(keeper.stats()[0].lookups, 0u);
  EXPECT_GT(keeper.stats()[0].hits, keeper.stats()[0].lookups / 3) << "half the sampled rows read the hot cross";
}

// Every zoo model, its lookup tables cached with caches of one row, 1% and 50% of their rows,
// scores exactly as with every table on the device: with the caches cold, once the keeper has
// filled them, and (on a GPU) with requests running on several threads while rows are evicted.
class CachedZooModel : public ::testing::TestWithParam<std::string> {};

TEST_P(CachedZooModel, ScoresAsWithResidentTables) {
  const std::string name = GetParam();
  std::vector<const Backend*> backends{nullptr};
  if (const Backend* cuda = testing::CudaOrNull()) backends.push_back(cuda);
  for (const Backend* backend : backends) {
    {
      const std::string dir = testing::SourcePath("models/zoo/" + name);
      ModelOptions options;
      if (backend) options.backend = backend;
      // Scores compared exactly: requests are not merged (a merged batch's shapes may round
      // differently; tests/batching_test.cc compares merged scores within the precision's bound).
      options.batching = 0;
      auto resident = Model::Load(dir, -1, options);
      ASSERT_TRUE(resident.ok()) << name << ": " << resident.status().ToString();
      const std::vector<InferRequest> requests = testing::ZooRequests(name);
      std::vector<std::vector<InferOutput>> want;
      for (const InferRequest& r : requests) {
        auto out = (*resident)->Infer(r);
        ASSERT_TRUE(out.ok()) << name << ": " << out.status().ToString();
        want.push_back(std::move(*out));
      }
      for (double fraction : {0.0, 0.01, 0.5}) {
        const std::string what = name + " with caches of " + std::to_string(fraction) + " of the rows on " +
                                 (backend ? backend->name() : "cpu");
        auto config = LoadModelConfig(dir);
        ASSERT_TRUE(config.ok());
        for (const TableInfo& t : (*resident)->tables()) {
          if (t.lookups_only)
            config->table_cache_rows[t.name] =
                std::max<int64_t>(1, static_cast<int64_t>(fraction * static_cast<double>(t.rows())));
        }
        auto cached = Model::LoadFile(dir + "/1/model.onnx", *config, options);
        ASSERT_TRUE(cached.ok()) << what << ": " << cached.status().ToString();
        EXPECT_GT(CachesBytes((*cached)->tables()), 0) << what;
        CacheKeeper* keeper = (*cached)->cache_keeper();
        EXPECT_EQ(keeper != nullptr, backend != nullptr) << what;  // the CPU reads host memory anyway
        for (int round = 0; round < 2; ++round) {                  // cold, then filled
          for (size_t i = 0; i < requests.size(); ++i) {
            auto got = (*cached)->Infer(requests[i]);
            ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
            testing::ExpectIdenticalOutputs(*got, want[i], what + ", round " + std::to_string(round));
            if (keeper) {
              ASSERT_TRUE(keeper->Flush().ok()) << what;
            }
          }
        }
        if (!keeper) continue;
        uint64_t inserted = 0, hits = 0;
        for (const TableCacheStats& s : keeper->stats()) inserted += s.inserted, hits += s.hits;
        EXPECT_GT(inserted, 0u) << what;
        if (fraction > 0.1) {
          EXPECT_GT(hits, 0u) << what;
        }
        // Several threads at once while the keeper moves rows in and out (the one-row caches evict
        // on nearly every offer).
        const testing::ScoredAtOnce at_once = testing::ScoreAtOnce(**cached, requests, want, 4, 30);
        EXPECT_EQ(at_once.failed, 0) << what;
        EXPECT_EQ(at_once.wrong, 0) << what;
        ASSERT_TRUE(keeper->Flush().ok()) << what;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, CachedZooModel, ::testing::Values("dlrm_dcnv2", "dlrm", "din", "bst", "mmoe"));

// A version loaded beside the serving one (a hot swap) shares its GPU caches: it starts with the rows
// they hold, moving none, and both versions score as with resident tables while they overlap, and the
// new one after the old one goes, with requests on several threads while its keeper moves rows.
TEST(CachedModelVersions, ANewVersionSharesTheServingVersionsGpuCaches) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "needs a GPU";
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  ModelOptions options;
  options.backend = cuda;
  options.batching = 0;
  auto resident = Model::Load(dir, -1, options);
  ASSERT_TRUE(resident.ok()) << resident.status().ToString();
  const std::vector<InferRequest> requests = testing::ZooRequests("dlrm_dcnv2");
  const std::vector<std::vector<InferOutput>> want = testing::ScoreEach(**resident, requests);
  ASSERT_FALSE(::testing::Test::HasFailure());
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok());
  for (const TableInfo& t : (*resident)->tables()) {
    if (t.lookups_only) config->table_cache_rows[t.name] = std::max<int64_t>(1, t.rows() / 10);
  }
  auto score = [&](Model& model, const std::string& what) {
    for (size_t i = 0; i < requests.size(); ++i) {
      auto got = model.Infer(requests[i]);
      ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
      testing::ExpectIdenticalOutputs(*got, want[i], what);
    }
  };
  auto old_version = Model::LoadFile(dir + "/1/model.onnx", *config, options);
  ASSERT_TRUE(old_version.ok()) << old_version.status().ToString();
  score(**old_version, "the old version");
  ASSERT_TRUE((*old_version)->cache_keeper()->Flush().ok());
  const std::vector<TableCacheStats> old_stats = (*old_version)->cache_keeper()->stats();
  int64_t held = 0;
  for (const TableCacheStats& s : old_stats) held += s.cached;
  ASSERT_GT(held, 0);

  auto new_version = Model::LoadFile(dir + "/1/model.onnx", *config, options);
  ASSERT_TRUE(new_version.ok()) << new_version.status().ToString();
  CacheKeeper* keeper = (*new_version)->cache_keeper();
  ASSERT_TRUE(keeper->Flush().ok());
  const std::vector<TableCacheStats> new_stats = keeper->stats();
  ASSERT_EQ(new_stats.size(), old_stats.size());
  for (size_t i = 0; i < new_stats.size(); ++i) {
    EXPECT_EQ(new_stats[i].cached, old_stats[i].cached) << new_stats[i].table;  // the rows it found
    EXPECT_EQ(new_stats[i].inserted, 0u) << new_stats[i].table;                 // none moved
  }
  score(**new_version, "the new version beside the old");
  score(**old_version, "the old version beside the new");
  ASSERT_TRUE(keeper->Flush().ok());
  old_version->reset();
  score(**new_version, "the new version alone");
  const testing::ScoredAtOnce at_once = testing::ScoreAtOnce(**new_version, requests, want, 4, 30);
  EXPECT_EQ(at_once.failed, 0);
  EXPECT_EQ(at_once.wrong, 0);
  ASSERT_TRUE(keeper->Flush().ok());
}

}  // namespace
}  // namespace rankd
