// Where embedding tables are kept (embedding/table_budget.h): found in the compiled graph, placed
// by the config's GPU budget and tiers, on named GPUs, over the GPUs, and on disk past the host budget.
#include "embedding/table_budget.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "backend/table_placement.h"
#include "embedding/disk_tables.h"
#include "model/config.h"
#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::GraphBuilder;

// Three bag tables of 10, 20 and 40 rows of 4 floats (160, 320 and 640 bytes), and a fourth table
// of 4 rows (64 bytes) that a bag and a product both read.
struct FourTables {
  Graph graph;
  int small = -1, middle = -1, large = -1, shared = -1;

  FourTables() {
    GraphBuilder g;
    std::mt19937_64 rng(3);
    int ids = g.Input("ids", DType::kI64, {2, 3});
    small = g.Const("small", testing::RandomTable(DType::kF32, 10, 4, rng));
    middle = g.Const("middle", testing::RandomTable(DType::kF32, 20, 4, rng));
    large = g.Const("large", testing::RandomTable(DType::kF32, 40, 4, rng));
    shared = g.Const("shared", testing::RandomTable(DType::kF32, 4, 4, rng));
    int sum = g.Op("EmbeddingBag", {small, ids});
    for (int table : {middle, large, shared}) sum = g.Op("Add", {sum, g.Op("EmbeddingBag", {table, ids})});
    g.Output(g.Op("MatMul", {sum, shared}));
    graph = g.graph();
  }
};

std::map<std::string, TableTier> Tiers(const std::vector<TableInfo>& tables) {
  std::map<std::string, TableTier> tiers;
  for (const TableInfo& t : tables) tiers[t.name] = t.tier;
  return tiers;
}

TEST(TableBudget, FindsTheLookupTablesAndWhatElseReadsThem) {
  FourTables m;
  std::vector<TableInfo> tables = FindTables(m.graph);
  ASSERT_EQ(tables.size(), 4u);
  for (const TableInfo& t : tables) {
    EXPECT_EQ(t.tier, TableTier::kDevice);
    EXPECT_EQ(t.lookups_only, t.name != "shared") << t.name;
    EXPECT_EQ(t.bytes, t.shape[0] * 16) << t.name;
  }
  // The product's weight is no table; an input read by a bag is none either.
  GraphBuilder g;
  std::mt19937_64 rng(1);
  int table = g.Const("t", testing::RandomTable(DType::kF32, 8, 2, rng));
  g.Output(g.Op("EmbeddingBag", {g.Input("dynamic", DType::kF32, {8, 2}), g.Input("ids", DType::kI64, {1, 2})}));
  g.Output(g.Op("Gather", {table, g.Input("rows", DType::kI64, {3})}, {{"axis", AttributeValue(int64_t{0})}}));
  std::vector<TableInfo> gathered = FindTables(g.graph());
  ASSERT_EQ(gathered.size(), 1u);
  EXPECT_EQ(gathered[0].name, "t");
  EXPECT_TRUE(gathered[0].lookups_only);
}

TEST(TableBudget, KeepsTheSmallestTablesOnTheDeviceWithinTheBudget) {
  FourTables m;
  // No budget: everything on the device, as before budgets existed.
  auto none = PlaceTables(m.graph, {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(TierBytes(*none, TableTier::kHost), 0);
  EXPECT_TRUE(ToPlacement(*none).host.empty());
  // A budget of 4,000: shared (64, read by a product) stays whatever the budget; small takes at most
  // half of an even share of the 3,936 left for three tables (656), middle of the 3,776 left for
  // two (944), large of the 3,456 left for one (1,728): everything stays on the device.
  auto all = PlaceTables(m.graph, {4000, {}});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(TierBytes(*all, TableTier::kDevice), 64 + 160 + 320 + 640);
  // 1,100: small (160 <= 1,036 / 6) stays; middle (320 > 876 / 4) and large are cached, the 876
  // bytes left shared in proportion to their bytes (292 and 584), each less its index (4 bytes a
  // row): 13 rows of middle (212 bytes of room), 26 of large (424).
  auto some = PlaceTables(m.graph, {1100, {}});
  ASSERT_TRUE(some.ok()) << some.status().ToString();
  auto tiers = Tiers(*some);
  EXPECT_EQ(tiers["shared"], TableTier::kDevice);
  EXPECT_EQ(tiers["small"], TableTier::kDevice);
  EXPECT_EQ(tiers["middle"], TableTier::kCache);
  EXPECT_EQ(tiers["large"], TableTier::kCache);
  for (const TableInfo& t : *some) {
    if (t.name == "middle") {
      EXPECT_EQ(t.cache_rows, 13);
    } else if (t.name == "large") {
      EXPECT_EQ(t.cache_rows, 26);
    }
  }
  EXPECT_EQ(TierBytes(*some, TableTier::kCache), 960);
  EXPECT_EQ(TierBytes(*some, TableTier::kDevice), 224);
  EXPECT_EQ(CachesBytes(*some), 20 * 4 + 13 * 16 + 40 * 4 + 26 * 16);
  EXPECT_LE(TierBytes(*some, TableTier::kDevice) + CachesBytes(*some), 1100);
  TablePlacement placement = ToPlacement(*some);
  EXPECT_TRUE(placement.host.empty());
  EXPECT_EQ(placement.CacheRows(m.large), 26);
  EXPECT_TRUE(placement.OnHost(m.large));
  EXPECT_FALSE(placement.OnHost(m.small));
  EXPECT_EQ(placement.CacheRows(m.small), 0);
  // 544: all three cached, 480 bytes shared: 1 row of small (68 - 40), 3 of middle (137 - 80), 7
  // of large (274 - 160).
  auto cached = PlaceTables(m.graph, {544, {}});
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  for (const TableInfo& t : *cached) {
    if (t.name == "shared") continue;
    EXPECT_EQ(t.tier, TableTier::kCache) << t.name;
    EXPECT_EQ(t.cache_rows, t.name == "small" ? 1 : t.name == "middle" ? 3 : 7) << t.name;
  }
  // A budget of 0 leaves only the shared table, and no room for any cache.
  auto zero = PlaceTables(m.graph, {0, {}});
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(TierBytes(*zero, TableTier::kDevice), 64);
  EXPECT_EQ(ToPlacement(*zero).host.size(), 3u);
}

// Tables of one size under a budget smaller than twice one of them are all cached, each a share of
// the budget: none is kept whole because the tables before it were cached (W1's 26 equal tables at
// 10% of their bytes once put two on the GPU and gave the others 1.7% each).
TEST(TableBudget, EqualTablesShareTheBudgetAsCaches) {
  GraphBuilder g;
  std::mt19937_64 rng(2);
  const int ids = g.Input("ids", DType::kI64, {1, 2});
  int sum = -1;
  for (int t = 0; t < 4; ++t) {
    const int bag =
        g.Op("EmbeddingBag", {g.Const("t" + std::to_string(t), testing::RandomTable(DType::kF32, 100, 4, rng)), ids});
    sum = sum < 0 ? bag : g.Op("Add", {sum, bag});
  }
  g.Output(sum);
  auto placed = PlaceTables(g.graph(), {3000, {}});  // each table 1,600 bytes
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  for (const TableInfo& t : *placed) {
    EXPECT_EQ(t.tier, TableTier::kCache) << t.name;
    EXPECT_EQ(t.cache_rows, (750 - 400) / 16) << t.name;  // a quarter of the budget, less the index
  }
}

TEST(TableBudget, NamedTiersComeFirstAndMistakesAreErrors) {
  FourTables m;
  // large named for the GPU takes the budget's first 640 bytes, shared 64; of the 296 left, small
  // and middle are cached.
  auto named = PlaceTables(m.graph, {1000, {{"large", TableTier::kDevice}}});
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  auto tiers = Tiers(*named);
  EXPECT_EQ(tiers["large"], TableTier::kDevice);
  EXPECT_EQ(tiers["small"], TableTier::kCache);
  EXPECT_EQ(tiers["middle"], TableTier::kCache);
  // Named for host memory without a budget.
  EXPECT_EQ(Tiers(PlaceTables(m.graph, {-1, {{"small", TableTier::kHost}}}).value())["small"], TableTier::kHost);

  auto unknown = PlaceTables(m.graph, {-1, {{"nope", TableTier::kHost}}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("'nope', which is not an embedding table"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("small, middle, large, shared"), std::string::npos)
      << unknown.status().message();
  auto shared = PlaceTables(m.graph, {-1, {{"shared", TableTier::kHost}}});
  ASSERT_FALSE(shared.ok());
  EXPECT_NE(shared.status().message().find("read by other ops than lookups"), std::string::npos);
  auto over = PlaceTables(m.graph, {100, {{"large", TableTier::kDevice}}});
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("more than tables.gpu_budget_mb allows"), std::string::npos);

  // Caches: sized by the config, counted against the budget; named for a cache, sized by the budget.
  TableBudget sized{-1, {}, {{"large", 5}, {"small", 1000}}};
  auto rows = PlaceTables(m.graph, sized);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  for (const TableInfo& t : *rows) {
    if (t.name == "large") {
      EXPECT_EQ(t.cache_rows, 5);
    } else if (t.name == "small") {
      EXPECT_EQ(t.cache_rows, 10);  // at most the table's rows
    }
  }
  EXPECT_EQ(Tiers(*rows)["middle"], TableTier::kDevice);
  sized.gpu_bytes = 100;  // shared (64) and large's cache (160 + 80) do not fit
  sized.cache_rows.erase("small");
  ASSERT_FALSE(PlaceTables(m.graph, sized).ok());
  auto unsized = PlaceTables(m.graph, {-1, {{"large", TableTier::kCache}}});
  ASSERT_FALSE(unsized.ok());
  EXPECT_NE(unsized.status().message().find("needs tables.gpu_budget_mb"), std::string::npos);
  auto no_room = PlaceTables(
      m.graph, {64 + 100, {{"large", TableTier::kCache}, {"small", TableTier::kHost}, {"middle", TableTier::kHost}}});
  ASSERT_FALSE(no_room.ok());
  EXPECT_NE(no_room.status().message().find("less than its index and one row take (176)"), std::string::npos)
      << no_room.status().ToString();
  auto shared_cache = PlaceTables(m.graph, {-1, {}, {{"shared", 2}}});
  ASSERT_FALSE(shared_cache.ok());
  EXPECT_NE(shared_cache.status().message().find("read by other ops than lookups"), std::string::npos);
}

// A table placed on a named GPU (tables.tiers' gpu:N) is on the device, there for every replica,
// outside each replica's budget; only a lookup table may go there, and not into a cache too.
TEST(TableBudget, TablesOnANamedGpu) {
  std::vector<int> gpus = {7};
  EXPECT_EQ(ParseTablePlace("gpu:1", &gpus).value(), TableTier::kDevice);
  EXPECT_EQ(gpus, std::vector<int>{1});
  EXPECT_EQ(ParseTablePlace("gpu:1,0", &gpus).value(), TableTier::kDevice);
  EXPECT_EQ(gpus, (std::vector<int>{1, 0}));
  EXPECT_EQ(ParseTablePlace("gpu", &gpus).value(), TableTier::kDevice);
  EXPECT_TRUE(gpus.empty());
  EXPECT_EQ(ParseTablePlace("host", &gpus).value(), TableTier::kHost);
  for (const char* bad : {"gpu:", "gpu:x", "gpu:-1", "gpu:64", "gpu:1,1", "gpu:all", "gpus:1"}) {
    EXPECT_FALSE(ParseTablePlace(bad, &gpus).ok()) << bad;
  }
  FourTables m;
  TableBudget budget{800, {{"large", TableTier::kDevice}}};
  budget.gpus["large"] = {1};
  auto placed = PlaceTables(m.graph, budget);
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  for (const TableInfo& t : *placed) {
    EXPECT_EQ(t.gpus, t.name == "large" ? std::vector<int>{1} : std::vector<int>{}) << t.name;
  }
  // large (640 bytes) is not in the budget of 800: it leaves the others as if it were not there.
  TableBudget without{800, {}};
  without.tiers["large"] = TableTier::kHost;
  auto others = Tiers(PlaceTables(m.graph, without).value());
  EXPECT_EQ(Tiers(*placed)["large"], TableTier::kDevice);
  EXPECT_EQ(Tiers(*placed)["small"], others["small"]);
  EXPECT_EQ(Tiers(*placed)["middle"], others["middle"]);
  TablePlacement placement = ToPlacement(*placed);
  ASSERT_NE(placement.Gpus(m.large), nullptr);
  EXPECT_EQ(*placement.Gpus(m.large), std::vector<int>{1});
  EXPECT_EQ(placement.Gpus(m.small), nullptr);
  EXPECT_FALSE(placement.OnHost(m.large));

  TableBudget shared{-1, {{"shared", TableTier::kDevice}}};
  shared.gpus["shared"] = {1};
  auto refused = PlaceTables(m.graph, shared);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("other ops than lookups read it"), std::string::npos)
      << refused.status().ToString();
  TableBudget cached{-1, {{"large", TableTier::kDevice}}, {{"large", 5}}};
  cached.gpus["large"] = {1, 0};
  refused = PlaceTables(m.graph, cached);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("placed on GPUs 1,0 and cached"), std::string::npos)
      << refused.status().ToString();

  auto config = ParseModelConfig("tables: {tiers: {t0: 'gpu:1', t1: gpu, t2: 'gpu:0,1'}}", true);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->table_tiers.at("t0"), "gpu:1");
  EXPECT_EQ(config->table_tiers.at("t2"), "gpu:0,1");
  for (const char* bad : {"tables: {tiers: {t0: 'gpu:'}}", "tables: {tiers: {t0: 'gpu:all'}}",
                          "tables: {tiers: {t0: 'gpu:0,0'}}", "tables: {tiers: {t0: 'gpu:x'}}"}) {
    auto r = ParseModelConfig(bad, true);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("gpu:N"), std::string::npos) << r.status().ToString();
  }
}

// tables.shard_over_gpus: the tables no replica keeps go once over the replicas' GPUs before any
// is cached: largest first, whole on the GPU with the most room (in whole 2 MiB granules), else
// split over all; what fits neither way is cached, in what the fullest GPU has left.
TEST(TableBudget, TablesNoReplicaKeepsArePlacedOnceOverTheGpus) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  EXPECT_EQ(GpuPartBytes(1, 1), 2 * kMiB);
  EXPECT_EQ(GpuPartBytes(9 * kMiB, 2), 6 * kMiB);
  EXPECT_EQ(GpuPartBytes(4 * kMiB, 2), 2 * kMiB);
  // Tables of 3, 3, 5 and 9 MiB (rows of 4 floats), all read by bags.
  GraphBuilder g;
  std::mt19937_64 rng(5);
  int ids = g.Input("ids", DType::kI64, {2, 3});
  int sum = -1;
  for (const auto& [name, mib] : std::vector<std::pair<std::string, int64_t>>{{"a", 3}, {"b", 3}, {"c", 5}, {"d", 9}}) {
    int table = g.Const(name, testing::RandomTable(DType::kF32, mib * kMiB / 16, 4, rng));
    int bag = g.Op("EmbeddingBag", {table, ids});
    sum = sum < 0 ? bag : g.Op("Add", {sum, bag});
  }
  g.Output(sum);
  const Graph graph = g.graph();
  auto gpus_of = [](const std::vector<TableInfo>& tables) {
    std::map<std::string, std::vector<int>> out;
    for (const TableInfo& t : tables) {
      if (t.tier == TableTier::kDevice) out[t.name] = t.gpus;
    }
    return out;
  };
  // 12 MiB a GPU: d (10 MiB whole) on GPU 0, c (6) on GPU 1, a (4) on GPU 1 (6 left there against
  // 2), b (4 whole fits neither) split, 2 MiB on each: nothing left to cache.
  TableBudget budget{12 * kMiB, {}};
  budget.shard_gpus = {0, 1};
  auto placed = PlaceTables(graph, budget);
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  using Gpus = std::vector<int>;
  EXPECT_EQ(gpus_of(*placed), (std::map<std::string, Gpus>{{"a", {1}}, {"b", {0, 1}}, {"c", {1}}, {"d", {0}}}));
  TablePlacement placement = ToPlacement(*placed);
  EXPECT_EQ(placement.gpus.size(), 4u);
  EXPECT_TRUE(placement.host.empty() && placement.cached.empty());
  // 8 MiB a GPU: d split (6 MiB on each), then a split (2 on each); b and c fit nowhere, and no
  // room is left for a cache's index: host memory.
  budget.gpu_bytes = 8 * kMiB;
  placed = PlaceTables(graph, budget);
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  EXPECT_EQ(gpus_of(*placed), (std::map<std::string, Gpus>{{"a", {0, 1}}, {"d", {0, 1}}}));
  EXPECT_EQ(Tiers(*placed)["b"], TableTier::kHost);
  EXPECT_EQ(Tiers(*placed)["c"], TableTier::kHost);
  // One GPU, or none named: cached as before.
  for (const std::vector<int>& one : {std::vector<int>{0}, std::vector<int>{}}) {
    budget.gpu_bytes = 12 * kMiB;
    budget.shard_gpus = one;
    placed = PlaceTables(graph, budget);
    ASSERT_TRUE(placed.ok()) << placed.status().ToString();
    EXPECT_TRUE(gpus_of(*placed).empty());
    for (const auto& [name, tier] : Tiers(*placed)) EXPECT_EQ(tier, TableTier::kCache) << name;
  }
  auto config = ParseModelConfig("tables: {gpu_budget_mb: 12, shard_over_gpus: true}", true);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config->table_shard_over_gpus);
  EXPECT_FALSE(ParseModelConfig("{}", false)->table_shard_over_gpus);
  auto bad = ParseModelConfig("tables: {shard_over_gpus: 2}", true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tables.shard_over_gpus must be true or false"), std::string::npos)
      << bad.status().ToString();
}

// Past the host budget, the tables the host would hold go on disk, largest first, until the rest
// fits; the tables on disk share what is left for their host caches in proportion to their bytes,
// a row at least. A table tables.tiers keeps in host memory does not move, and a budget it alone
// exceeds is an error; without a GPU budget every table is on the device and nothing moves.
TEST(TableBudget, TablesPastTheHostBudgetGoOnDiskLargestFirst) {
  // FourTables' tables, each bag with ids of its own (tables on disk get their ids rewritten).
  GraphBuilder g;
  std::mt19937_64 rng(3);
  const int shared = g.Const("shared", testing::RandomTable(DType::kF32, 4, 4, rng));
  int sum = g.Op("EmbeddingBag", {shared, g.Input("ids_shared", DType::kI64, {2, 3})});
  for (auto [name, rows] : {std::pair{"small", 10}, {"middle", 20}, {"large", 40}}) {
    const int table = g.Const(name, testing::RandomTable(DType::kF32, rows, 4, rng));
    sum = g.Op("Add", {sum, g.Op("EmbeddingBag", {table, g.Input(std::string("ids_") + name, DType::kI64, {2, 3})})});
  }
  g.Output(g.Op("MatMul", {sum, shared}));
  const Graph graph = g.graph();
  auto place = [&](int64_t host_bytes, std::map<std::string, TableTier> tiers = {}) {
    TableBudget budget{0, std::move(tiers)};  // no GPU room: small, middle and large in host memory
    budget.host_bytes = host_bytes;
    return PlaceTables(graph, budget);
  };
  // The host cache each table on disk gets, as DiskTables shares what the budget leaves.
  const std::string dir = std::filesystem::path(testing::WriteTempFile("host_budget/x", "")).parent_path().string();
  auto cache_rows = [&](const std::vector<TableInfo>& tables, int64_t host_bytes, const std::string& name) {
    Graph edited = graph;
    TableBudget budget;
    budget.host_bytes = host_bytes;
    DiskTablesOptions on_disk;
    on_disk.directory = dir;
    on_disk.cache_bytes = DiskCacheBytes(tables, budget);
    auto disk = DiskTables::Open(edited, tables, on_disk);
    EXPECT_TRUE(disk.ok()) << disk.status().ToString();
    if (!disk.ok()) return int64_t{-1};
    for (const DiskTableStats& t : (*disk)->stats()) {
      if (t.table == name) return t.capacity;
    }
    return int64_t{-1};
  };
  auto fits = place(1120);  // 160 + 320 + 640
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_EQ(TierBytes(*fits, TableTier::kDisk), 0);
  EXPECT_EQ(TierBytes(*fits, TableTier::kHost), 1120);
  // 1,000: large goes; its host cache gets the 520 bytes left: 8 of its 40 rows of 16 bytes, each
  // with 42 bytes of the cache policy's bookkeeping (CachePolicy::kBytesPerSlot).
  auto one = place(1000);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(Tiers(*one)["large"], TableTier::kDisk);
  EXPECT_EQ(Tiers(*one)["middle"], TableTier::kHost);
  EXPECT_EQ(Tiers(*one)["shared"], TableTier::kDevice);
  TableBudget thousand;
  thousand.host_bytes = 1000;
  EXPECT_EQ(DiskCacheBytes(*one, thousand), 520);
  EXPECT_EQ(cache_rows(*one, 1000, "large"), 8);
  EXPECT_TRUE(ToPlacement(*one).cached.empty());
  // 450: large and middle go; the 290 bytes left split 2:1 (193 and 96 bytes): 3 rows and 1.
  auto two = place(450);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(TierBytes(*two, TableTier::kDisk), 960);
  EXPECT_EQ(TierBytes(*two, TableTier::kHost), 160);
  EXPECT_EQ(cache_rows(*two, 450, "large"), 3);
  EXPECT_EQ(cache_rows(*two, 450, "middle"), 1);
  // 0: all three go, each with a host cache of one row.
  auto all = place(0);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(TierBytes(*all, TableTier::kDisk), 1120);
  for (const char* name : {"small", "middle", "large"}) EXPECT_EQ(cache_rows(*all, 0, name), 1) << name;
  // large kept in host memory by name: middle and small go, and 640 bytes still do not fit 300.
  auto named = place(300, {{"large", TableTier::kHost}});
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.status().message().find("tables.host_budget_mb"), std::string::npos) << named.status().ToString();
  EXPECT_NE(named.status().message().find("640 bytes"), std::string::npos) << named.status().ToString();
  // No GPU budget: every table on the device, nothing in host memory to move.
  TableBudget device_only;
  device_only.host_bytes = 0;
  auto on_device = PlaceTables(graph, device_only);
  ASSERT_TRUE(on_device.ok()) << on_device.status().ToString();
  EXPECT_EQ(TierBytes(*on_device, TableTier::kDisk), 0);
  // The config's key, and disk_cache_mb beside it refused (both would size the same caches).
  auto c = ParseModelConfig("tables: {gpu_budget_mb: 0, host_budget_mb: 2048}", true);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->table_host_budget_mb, 2048);
  EXPECT_EQ(ParseModelConfig("{}", false)->table_host_budget_mb, -1);
  for (const char* bad : {"tables: {host_budget_mb: -1}", "tables: {host_budget_mb: 0.5}",
                          "tables: {host_budget_mb: 10, disk_cache_mb: 10}"}) {
    auto r = ParseModelConfig(bad, true);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("tables."), std::string::npos) << r.status().ToString();
  }
}

// A table the GPU budget cached and the host budget sends to disk keeps its GPU cache, in front of
// its host cache, where its lookups are bags of a concatenation (embedding/gpu_row_tier.h); one an
// EmbeddingBag reads gives it up. Named, a table on disk with a cache size has that GPU cache, its
// device bytes its rows alone (the index is on the host).
TEST(TableBudget, ATableSentToDiskKeepsTheGpuCacheItsLookupsCanRead) {
  GraphBuilder g;
  std::mt19937_64 rng(5);
  const int fused = g.Const("fused", testing::RandomTable(DType::kF32, 1000, 4, rng));
  const int plain = g.Const("plain", testing::RandomTable(DType::kF32, 1000, 4, rng));
  const int a = g.Op("ConcatEmbeddingBags", {fused, g.Input("ids_fused", DType::kI64, {2, 3})},
                     {{"parts", std::vector<int64_t>{2}}, {"modes", std::vector<int64_t>{0}}});
  g.Output(g.Op("Add", {a, g.Op("EmbeddingBag", {plain, g.Input("ids_plain", DType::kI64, {2, 3})})}));
  const Graph graph = g.graph();
  TableBudget budget;
  budget.gpu_bytes = 12000;  // too little to keep either: a cache of each
  auto cached = PlaceTables(graph, budget);
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  ASSERT_EQ(Tiers(*cached)["fused"], TableTier::kCache);
  ASSERT_EQ(Tiers(*cached)["plain"], TableTier::kCache);
  budget.host_bytes = 0;
  auto on_disk = PlaceTables(graph, budget);
  ASSERT_TRUE(on_disk.ok()) << on_disk.status().ToString();
  const TableInfo& was = (*cached)[0].name == "fused" ? (*cached)[0] : (*cached)[1];
  ASSERT_EQ(was.name, "fused");
  for (const TableInfo& t : *on_disk) {
    EXPECT_EQ(t.tier, TableTier::kDisk) << t.name;
    if (t.name == "fused") {
      // The GPU bytes its cache had, index and rows, are all rows now (its index is on the host).
      EXPECT_EQ(CacheBytes(t, t.cache_rows), t.cache_rows * 16);
      EXPECT_EQ(CacheBytes(t, t.cache_rows), CacheBytes(was, was.cache_rows));
      EXPECT_EQ(t.cache_rows, was.cache_rows + 1000 * 4 / 16);
    } else {
      EXPECT_EQ(t.cache_rows, 0) << t.name;
    }
  }
  EXPECT_TRUE(ToPlacement(*on_disk).cached.empty());  // no host table under a device cache
  TableBudget named;
  named.tiers = {{"fused", TableTier::kDisk}};
  named.cache_rows = {{"fused", 100}};
  auto explicit_cache = PlaceTables(graph, named);
  ASSERT_TRUE(explicit_cache.ok()) << explicit_cache.status().ToString();
  EXPECT_EQ(Tiers(*explicit_cache)["fused"], TableTier::kDisk);
  EXPECT_EQ(CachesBytes(*explicit_cache), 100 * 16);
}

TEST(TableBudget, ConfigReadsTheBudgetAndTiers) {
  auto c = ParseModelConfig("tables: {dtype: BF16, gpu_budget_mb: 512, tiers: {t0: host, t1: gpu}}", true);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->table_gpu_budget_mb, 512);
  EXPECT_EQ(c->table_tiers.at("t0"), "host");
  EXPECT_EQ(c->table_tiers.at("t1"), "gpu");
  EXPECT_EQ(ParseModelConfig("{}", false)->table_gpu_budget_mb, -1);
  auto cached = ParseModelConfig(
      "tables: {tiers: {t0: cache}, cache_rows: {t0: 100, t2: 1}, hotness_snapshot: /var/lib/rankd/w1.hot}", true);
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  EXPECT_EQ(cached->table_tiers.at("t0"), "cache");
  EXPECT_EQ(cached->table_cache_rows.at("t0"), 100);
  EXPECT_EQ(cached->table_cache_rows.at("t2"), 1);
  EXPECT_EQ(cached->table_hotness_snapshot, "/var/lib/rankd/w1.hot");
  for (const char* bad : {"tables: {gpu_budget_mb: -1}", "tables: {gpu_budget_mb: 1.5}", "tables: {tiers: [t0]}",
                          "tables: {tiers: {t0: ssd}}", "tables: {cache: true}", "tables: {cache_rows: {t0: 0}}",
                          "tables: {cache_rows: [t0]}", "tables: {cache_rows: {t0: 1.5}}",
                          "tables: {tiers: {t0: host}, cache_rows: {t0: 5}}", "tables: {hotness_snapshot: 3}",
                          "tables: {hotness_snapshot: ''}"}) {
    auto r = ParseModelConfig(bad, true);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("tables"), std::string::npos) << r.status().ToString();
  }
}

// A model loads with its placement, which inspect and metrics read; a tier naming no table fails
// the load with the names it has.
TEST(TableBudget, ModelPlacesItsTablesAtLoad) {
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  ModelOptions options;
  options.table_gpu_budget_mb = 0;
  auto model = Model::Load(dir, -1, options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->tables().size(), 26u);
  EXPECT_EQ(TierBytes((*model)->tables(), TableTier::kDevice), 0);
  EXPECT_EQ((*model)->config().table_gpu_budget_mb, 0);
  testing::ExpectZooScores(**model, "dlrm_dcnv2", 1e-5);

  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok());
  config->table_tiers["tables.99.weight"] = "host";
  auto bad = Model::LoadFile(dir + "/1/model.onnx", *config);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tables.99.weight"), std::string::npos) << bad.status().ToString();
}

// What tables on named GPUs take on each GPU, as CudaBackend::CheckRoom counts it (a GPU may hold
// tables that no replica runs on): equal parts rounded up to the mapping's granularity.
TEST(TablePlacement, NamedDeviceBytesCountsEachGpusRoundedParts) {
  Graph g;
  g.constants[3] = Tensor::Zeros(DType::kF32, {10, 100});     // 4,000 bytes over GPUs 0 and 1
  g.constants[5] = Tensor::Zeros(DType::kF32, {1025, 1024});  // 4 MiB and 4 KiB on GPU 1 alone
  g.constants[7] = Tensor::Zeros(DType::kF32, {4, 4});        // on the replica's own GPU: not named
  TablePlacement tables;
  tables.gpus[3] = {0, 1};
  tables.gpus[5] = {1};
  tables.gpus[9] = {0};  // no such table in the graph
  std::map<int, int64_t> bytes = NamedDeviceBytes(g, tables, 1024);
  EXPECT_EQ(bytes, (std::map<int, int64_t>{{0, 2048}, {1, 2048 + 1025 * 1024 * 4}}));
  bytes = NamedDeviceBytes(g, tables, int64_t{2} << 20);
  EXPECT_EQ(bytes, (std::map<int, int64_t>{{0, int64_t{2} << 20}, {1, (int64_t{2} << 20) + (int64_t{6} << 20)}}));
  tables.gpus[3] = {1, 2, 3};  // 4,000 bytes in three parts of 1,334, rounded to 2,048 each
  bytes = NamedDeviceBytes(g, tables, 1024);
  EXPECT_EQ(bytes, (std::map<int, int64_t>{{1, 2048 + 1025 * 1024 * 4}, {2, 2048}, {3, 2048}}));
  EXPECT_TRUE(NamedDeviceBytes(g, TablePlacement{}, 1024).empty());
}

}  // namespace
}  // namespace rankd
