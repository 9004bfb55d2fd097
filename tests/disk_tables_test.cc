// Tables on disk (embedding/disk_tables.h): a model whose lookup tables are read from files, each
// run's rows fetched through a host cache before it runs, scores exactly as with its tables in
// memory, whatever the cache holds and with requests running at once.
#include "embedding/disk_tables.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "model/config.h"
#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

namespace fs = std::filesystem;
using testing::GraphBuilder;

// An empty folder for the tables' files.
std::string DiskDir(const std::string& name) {
  const fs::path dir = fs::path(testing::WriteTempFile("disk_tables/" + name + "/x", "")).parent_path();
  for (const auto& entry : fs::directory_iterator(dir)) fs::remove(entry.path());
  return dir.string();
}

// Options for scores compared exactly on `backend`: requests are not merged.
ModelOptions Exact(const Backend* backend) {
  ModelOptions options;
  options.backend = backend;
  options.batching = 0;
  return options;
}

// `config` with every lookup table of `tables` that may go on disk there: a table whose ids
// something else reads is refused by name, and the load tried again without it. Returns the
// model, or null after a failure the test reports.
std::unique_ptr<Model> LoadWithTablesOnDisk(const std::string& onnx, ModelConfig config,
                                            const std::vector<TableInfo>& tables, const ModelOptions& options,
                                            const std::string& what) {
  std::set<std::string> refused;
  for (int attempt = 0; attempt <= static_cast<int>(tables.size()); ++attempt) {
    config.table_tiers.clear();
    for (const TableInfo& t : tables) {
      if (t.lookups_only && !refused.count(t.name)) config.table_tiers[t.name] = "disk";
    }
    if (config.table_tiers.empty()) {
      ADD_FAILURE() << what << ": no table may go on disk";
      return nullptr;
    }
    auto model = Model::LoadFile(onnx, config, options);
    if (model.ok()) return std::move(*model);
    const std::string message = model.status().message();
    const size_t at = message.find("tables: table '");
    if (at == std::string::npos || message.find("cannot be on disk") == std::string::npos) {
      ADD_FAILURE() << what << ": " << model.status().ToString();
      return nullptr;
    }
    const size_t from = at + std::string("tables: table '").size();
    refused.insert(message.substr(from, message.find('\'', from) - from));
  }
  ADD_FAILURE() << what << ": every table refused";
  return nullptr;
}

// Every zoo model with its lookup tables on disk, their host caches of one row, a tenth and all of
// the rows, scores exactly as with its tables in memory, cold and warm, on the CPU and the GPU, and
// with four threads at once; the copies written at load are already unlinked.
class DiskZooModel : public ::testing::TestWithParam<std::string> {};

TEST_P(DiskZooModel, ScoresAsWithTablesInMemory) {
  const std::string name = GetParam();
  const std::string dir = testing::SourcePath("models/zoo/" + name);
  const std::vector<InferRequest> requests = testing::ZooRequests(name);
  for (const Backend* backend : {&CpuBackend(), testing::CudaOrNull()}) {
    if (!backend) continue;
    const ModelOptions options = Exact(backend);
    auto resident = Model::Load(dir, -1, options);
    ASSERT_TRUE(resident.ok()) << name << ": " << resident.status().ToString();
    std::vector<std::vector<InferOutput>> want;
    for (const InferRequest& r : requests) {
      auto out = (*resident)->Infer(r);
      ASSERT_TRUE(out.ok()) << name << ": " << out.status().ToString();
      want.push_back(std::move(*out));
    }
    for (int64_t cache_mb : {0, -1, 64}) {
      const std::string what =
          name + " on " + backend->name() + " with a host cache of " + std::to_string(cache_mb) + " MB";
      auto config = LoadModelConfig(dir);
      ASSERT_TRUE(config.ok());
      config->table_disk_dir = DiskDir(name);
      config->table_disk_cache_mb = cache_mb;
      std::unique_ptr<Model> disk =
          LoadWithTablesOnDisk(dir + "/1/model.onnx", *config, (*resident)->tables(), options, what);
      ASSERT_TRUE(disk) << what;
      EXPECT_TRUE(fs::is_empty(config->table_disk_dir)) << what;  // the copies are unlinked
      const DiskTables* tables = disk->disk_tables();
      ASSERT_NE(tables, nullptr) << what;
      ASSERT_FALSE(tables->stats().empty()) << what;
      for (int round = 0; round < 2; ++round) {
        for (size_t i = 0; i < requests.size(); ++i) {
          auto got = disk->Infer(requests[i]);
          ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
          testing::ExpectIdenticalOutputs(*got, want[i], what + ", round " + std::to_string(round));
        }
      }
      const testing::ScoredAtOnce at_once = testing::ScoreAtOnce(*disk, requests, want, 4, 20);
      EXPECT_EQ(at_once.failed, 0) << what;
      EXPECT_EQ(at_once.wrong, 0) << what;
      uint64_t lookups = 0, hits = 0, read = 0;
      for (const DiskTableStats& s : tables->stats()) {
        lookups += s.lookups, hits += s.hits, read += s.rows_read;
        EXPECT_LE(s.cached, s.capacity) << what << " " << s.table;
        if (cache_mb == 0) {
          EXPECT_EQ(s.capacity, 1) << what << " " << s.table;
        }
      }
      EXPECT_GT(lookups, 0u) << what;
      EXPECT_GT(read, 0u) << what;
      if (cache_mb == 64) {
        EXPECT_GT(hits, lookups / 2) << what;  // every row cached once read
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, DiskZooModel, ::testing::Values("dlrm_dcnv2", "dlrm", "din", "bst", "mmoe"));

// A host budget smaller than the tables (none at all) with no GPU budget: every W1 table goes on
// disk, read from the model's external-data file, and the model scores as with them in memory, on
// the CPU and the GPU. A model whose tables cannot all go on disk (DIN's item and category ids are
// computed) and do not fit is refused, naming the budget.
TEST(DiskTables, AHostBudgetSmallerThanTheTablesPutsThemOnDisk) {
  const std::string onnx = testing::WithExternalTables("dlrm_dcnv2");
  const std::vector<InferRequest> requests = testing::ZooRequests("dlrm_dcnv2");
  for (const Backend* backend : {&CpuBackend(), testing::CudaOrNull()}) {
    if (!backend) continue;
    const ModelOptions options = Exact(backend);
    auto config = LoadModelConfig(testing::SourcePath("models/zoo/dlrm_dcnv2"));
    ASSERT_TRUE(config.ok());
    auto resident = Model::LoadFile(onnx, *config, options);
    ASSERT_TRUE(resident.ok()) << resident.status().ToString();
    config->table_gpu_budget_mb = 0;
    config->table_host_budget_mb = 0;
    auto budgeted = Model::LoadFile(onnx, *config, options);
    ASSERT_TRUE(budgeted.ok()) << backend->name() << ": " << budgeted.status().ToString();
    EXPECT_EQ(TierBytes((*budgeted)->tables(), TableTier::kDisk), TierBytes((*resident)->tables(), TableTier::kDevice));
    ASSERT_NE((*budgeted)->disk_tables(), nullptr);
    for (const DiskTableStats& s : (*budgeted)->disk_tables()->stats()) {
      EXPECT_EQ(s.capacity, 1) << s.table;  // nothing left of the budget: a row each
      EXPECT_NE(s.file.find("tables.bin"), std::string::npos) << s.file;
    }
    for (const InferRequest& r : requests) {
      auto want = (*resident)->Infer(r);
      auto got = (*budgeted)->Infer(r);
      ASSERT_TRUE(want.ok() && got.ok()) << backend->name();
      testing::ExpectIdenticalOutputs(*got, *want, std::string("W1 under a host budget of 0 on ") + backend->name());
    }
  }
  ModelOptions options;
  options.table_gpu_budget_mb = 0;
  options.table_host_budget_mb = 0;
  auto config = LoadModelConfig(testing::SourcePath("models/zoo/din"));
  ASSERT_TRUE(config.ok());
  config->table_disk_dir = DiskDir("din_budget");
  auto din = Model::LoadFile(testing::SourcePath("models/zoo/din/1/model.onnx"), *config, options);
  ASSERT_FALSE(din.ok());
  EXPECT_NE(din.status().message().find("tables.host_budget_mb"), std::string::npos) << din.status().ToString();
}

// Shape buckets (padding each request to a bucket's shape; CUDA graphs on a GPU): with tables on
// disk the rows are staged from the padded request before an executor is taken, and W1 scores as
// with its tables in memory and the same buckets.
TEST(DiskTables, RequestsPaddedToBucketsScoreAsInMemory) {
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  const std::vector<InferRequest> requests = testing::ZooRequests("dlrm_dcnv2");
  for (const Backend* backend : {&CpuBackend(), testing::CudaOrNull()}) {
    if (!backend) continue;
    ModelOptions options = Exact(backend);
    options.shape_buckets = 1;
    auto resident = Model::Load(dir, -1, options);
    ASSERT_TRUE(resident.ok()) << resident.status().ToString();
    options.tables_on_disk = DiskDir("buckets");
    auto disk = Model::Load(dir, -1, options);
    ASSERT_TRUE(disk.ok()) << disk.status().ToString();
    ASSERT_NE((*disk)->disk_tables(), nullptr);
    EXPECT_EQ((*disk)->load_report().buckets.rfind("on", 0), 0u) << (*disk)->load_report().buckets;
    std::vector<std::vector<InferOutput>> want;
    for (const InferRequest& r : requests) {
      auto out = (*resident)->Infer(r);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      want.push_back(std::move(*out));
    }
    for (int round = 0; round < 2; ++round) {
      for (size_t i = 0; i < requests.size(); ++i) {
        auto got = (*disk)->Infer(requests[i]);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        testing::ExpectIdenticalOutputs(*got, want[i], std::string("buckets on ") + backend->name());
      }
    }
    const testing::ScoredAtOnce at_once = testing::ScoreAtOnce(**disk, requests, want, 4, 10);
    EXPECT_EQ(at_once.failed, 0);
    EXPECT_EQ(at_once.wrong, 0);
  }
}

// W1 with every table on disk and a GPU cache of a tenth of its rows in front of each host cache
// (embedding/gpu_row_tier.h), on the GPU: scores exactly as with its tables in memory, cold and
// once the keepers have filled the caches (its lookups then read rows from them), and with four
// threads at once while the keepers swap rows. Each table's lookups are bags of a concatenation.
TEST(DiskTablesGpuCache, W1ScoresAsWithTablesInMemory) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  const std::vector<InferRequest> requests = testing::ZooRequests("dlrm_dcnv2");
  const ModelOptions options = Exact(cuda);
  auto resident = Model::Load(dir, -1, options);
  ASSERT_TRUE(resident.ok()) << resident.status().ToString();
  const std::vector<std::vector<InferOutput>> want = testing::ScoreEach(**resident, requests);
  ASSERT_FALSE(::testing::Test::HasFailure());
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok());
  config->table_disk_dir = DiskDir("gpu_cache");
  config->table_disk_cache_mb = 1;
  config->table_hotness_snapshot = DiskDir("gpu_cache_hotness") + "/w1.hot";
  for (const TableInfo& t : (*resident)->tables()) {
    config->table_tiers[t.name] = "disk";
    config->table_cache_rows[t.name] = std::max<int64_t>(1, t.rows() / 10);
  }
  auto disk = Model::LoadFile(dir + "/1/model.onnx", *config, options);
  ASSERT_TRUE(disk.ok()) << disk.status().ToString();
  const DiskTables* tables = (*disk)->disk_tables();
  ASSERT_NE(tables, nullptr);
  for (const DiskTableStats& s : tables->stats()) EXPECT_TRUE(s.gpu_cache) << s.table;
  const auto cached = [&] {
    int64_t rows = 0;
    for (const DiskTableStats& s : tables->stats()) rows += s.gpu.cached;
    return rows;
  };
  for (int round = 0; round < 20; ++round) {
    for (size_t i = 0; i < requests.size(); ++i) {
      auto got = (*disk)->Infer(requests[i]);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      testing::ExpectIdenticalOutputs(*got, want[i], "GPU caches of tables on disk, round " + std::to_string(round));
    }
    if (round >= 2 && cached() > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GT(cached(), 0);
  uint64_t hits = 0;
  for (const DiskTableStats& s : tables->stats()) hits += s.gpu.hits;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto got = (*disk)->Infer(requests[i]);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    testing::ExpectIdenticalOutputs(*got, want[i], "GPU caches of tables on disk, filled");
  }
  uint64_t hits_after = 0;
  for (const DiskTableStats& s : tables->stats()) hits_after += s.gpu.hits;
  EXPECT_GT(hits_after, hits);  // rows read from the GPU caches
  const testing::ScoredAtOnce at_once = testing::ScoreAtOnce(**disk, requests, want, 4, 20);
  EXPECT_EQ(at_once.failed, 0);
  EXPECT_EQ(at_once.wrong, 0);
  // Restarted: the GPU caches hold the rows they held as the model went (saved with the host
  // caches' snapshot) once the warm start is done, before any request, and score as ever. (Their
  // keeper may still move in rows offered before `held` is read: caches only grow until full.)
  const int64_t held = cached();
  disk->reset();
  auto restarted = Model::LoadFile(dir + "/1/model.onnx", *config, options);
  ASSERT_TRUE(restarted.ok()) << restarted.status().ToString();
  tables = (*restarted)->disk_tables();
  ASSERT_NE(tables, nullptr);
  tables->WaitForWarmStart();
  uint64_t warmed = 0;
  for (const DiskTableStats& s : tables->stats()) warmed += s.gpu.warmed;
  EXPECT_GE(cached(), held);
  EXPECT_EQ(warmed, static_cast<uint64_t>(cached()));
  hits = 0;
  for (const DiskTableStats& s : tables->stats()) hits += s.gpu.hits;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto got = (*restarted)->Infer(requests[i]);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    testing::ExpectIdenticalOutputs(*got, want[i], "GPU caches of tables on disk, restarted warm");
  }
  hits_after = 0;
  for (const DiskTableStats& s : tables->stats()) hits_after += s.gpu.hits;
  EXPECT_GT(hits_after, hits);
}

// An id out of range fails its own request with the usual error, and the next request scores.
TEST(DiskTables, AnIdOutOfRangeFailsOnlyItsRequest) {
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  ModelOptions options;
  options.batching = 0;
  auto resident = Model::Load(dir, -1, options);
  ASSERT_TRUE(resident.ok());
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok());
  config->table_disk_dir = DiskDir("out_of_range");
  std::unique_ptr<Model> disk =
      LoadWithTablesOnDisk(dir + "/1/model.onnx", *config, (*resident)->tables(), options, "dlrm_dcnv2");
  ASSERT_TRUE(disk);
  std::vector<InferRequest> requests = testing::ZooRequests("dlrm_dcnv2");
  InferRequest bad = requests[0];
  for (InferInput& in : bad.inputs) {
    if (in.data.dtype() == DType::kI64 && in.data.size() > 0) {
      in.data.data<int64_t>()[0] = int64_t{1} << 40;
      break;
    }
  }
  auto refused = disk->Infer(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("out of range"), std::string::npos) << refused.status().ToString();
  auto want = (*resident)->Infer(requests[1]);
  auto got = disk->Infer(requests[1]);
  ASSERT_TRUE(want.ok() && got.ok());
  testing::ExpectIdenticalOutputs(*got, *want, "after the refusal");
}

// Tables loaded from an external-data file are read from it, through the descriptor the load
// opened: a file renamed over it afterwards changes no score. Nothing is written to disk_dir.
TEST(DiskTables, ReadsTheExternalDataFileAsItWasLoaded) {
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok());
  const std::string onnx = testing::WithExternalTables("dlrm_dcnv2");
  ModelOptions options;
  auto resident = Model::LoadFile(onnx, *config, options);
  ASSERT_TRUE(resident.ok()) << resident.status().ToString();
  std::unique_ptr<Model> disk = LoadWithTablesOnDisk(onnx, *config, (*resident)->tables(), options, "external");
  ASSERT_TRUE(disk);
  const fs::path data = fs::path(onnx).parent_path() / "tables.bin";
  for (const DiskTableStats& s : disk->disk_tables()->stats()) EXPECT_EQ(s.file, data.string()) << s.table;
  testing::ExpectZooScores(*disk, "dlrm_dcnv2", 1e-5);
  {
    const fs::path other = data.string() + ".new";
    std::ofstream(other, std::ios::binary) << std::string(fs::file_size(data), '\x7f');
    fs::rename(other, data);
  }
  testing::ExpectZooScores(*disk, "dlrm_dcnv2", 1e-5);
}

// A table stays off disk, with an error naming it and why, when something else reads its ids (a
// graph output, another op), when the graph computes its ids, or when it is held in memory and no
// folder is given to write it to.
TEST(DiskTables, RefusesTablesItCannotServe) {
  std::mt19937_64 rng(9);
  auto place = [](const Graph& graph) {
    std::vector<TableInfo> tables = FindTables(graph);
    for (TableInfo& t : tables) t.tier = TableTier::kDisk;
    return tables;
  };
  auto refusal = [&](Graph graph, const std::string& directory) {
    DiskTablesOptions options;
    options.directory = directory;
    auto opened = DiskTables::Open(graph, place(graph), options);
    return opened.ok() ? std::string("opened") : opened.status().message();
  };
  const std::string directory = DiskDir("refusals");
  {
    GraphBuilder g;
    const int table = g.Const("t", testing::RandomTable(DType::kF32, 50, 4, rng));
    const int ids = g.Input("ids", DType::kI64, {-1, 3});
    g.Output(g.Op("EmbeddingBag", {table, ids}));
    g.Output(ids);
    EXPECT_NE(refusal(g.graph(), directory).find("are a graph output"), std::string::npos);
  }
  {
    GraphBuilder g;
    const int table = g.Const("t", testing::RandomTable(DType::kF32, 50, 4, rng));
    const int ids = g.Input("ids", DType::kI64, {-1, 3});
    g.Output(g.Op("EmbeddingBag", {table, g.Op("Abs", {ids})}));
    EXPECT_NE(refusal(g.graph(), directory).find("ids the graph computes"), std::string::npos);
  }
  {
    GraphBuilder g;
    const int table = g.Const("t", testing::RandomTable(DType::kF32, 50, 4, rng));
    const int ids = g.Input("ids", DType::kI64, {-1, 3});
    g.Output(g.Op("EmbeddingBag", {table, ids}));
    g.Output(g.Op("Cast", {ids}, {{"to", int64_t{1}}}));
    EXPECT_NE(refusal(g.graph(), directory).find("also read by"), std::string::npos);
  }
  {
    GraphBuilder g;
    const int table = g.Const("t", testing::RandomTable(DType::kF32, 50, 4, rng));
    const int ids = g.Input("ids", DType::kI64, {-1, 3});
    g.Output(g.Op("EmbeddingBag", {table, ids}));
    EXPECT_NE(refusal(g.graph(), "").find("tables.disk_dir"), std::string::npos);
    Graph graph = g.graph();
    DiskTablesOptions options;
    options.directory = directory;
    auto opened = DiskTables::Open(graph, place(graph), options);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    EXPECT_FALSE(graph.IsConstant(table));  // now the graph's second input: the run's rows
    ASSERT_EQ(graph.inputs.size(), 2u);
    EXPECT_EQ(graph.inputs[1], table);
  }
}

// Staging directly: a table of 20,000 rows whose host cache is split into shards. Every rewritten id
// names a staged row equal to the table's row for the original id, each distinct row is staged
// once, empty slots stay empty, and a second run is served from the host cache.
TEST(DiskTables, StagesEachDistinctRowOnceAcrossShards) {
  std::mt19937_64 rng(4);
  GraphBuilder g;
  const Tensor rows = testing::RandomTable(DType::kF32, 20000, 4, rng);
  const int table = g.Const("t", rows);
  const int ids = g.Input("ids", DType::kI64, {-1, 5});
  g.Output(g.Op("EmbeddingBag", {table, ids}));
  Graph graph = g.graph();
  std::vector<TableInfo> tables = FindTables(graph);
  for (TableInfo& t : tables) t.tier = TableTier::kDisk;
  DiskTablesOptions options;
  options.directory = DiskDir("shards");
  options.cache_bytes = int64_t{1} << 30;
  auto disk = DiskTables::Open(graph, tables, options);
  ASSERT_TRUE(disk.ok()) << disk.status().ToString();
  ASSERT_EQ((*disk)->stats().size(), 1u);
  EXPECT_EQ((*disk)->stats()[0].capacity, 20000);
  std::vector<int64_t> values(64 * 5);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = i % 7 == 3 ? -1 : i % 3 == 0 ? static_cast<int64_t>(i % 10) : static_cast<int64_t>(rng() % 20000);
  }
  const std::vector<Tensor> inputs{Tensor::FromVector(DType::kI64, {64, 5}, values)};
  std::vector<TensorMeta> metas{{DType::kI64, {64, 5}, nullptr}};
  (*disk)->AppendMetas(metas);
  ASSERT_EQ(metas.size(), 2u);
  EXPECT_EQ(metas[1].shape, (Shape{320, 4}));
  for (int round = 0; round < 2; ++round) {
    auto staged = (*disk)->Stage(inputs, std::vector<int64_t>{320});
    ASSERT_TRUE(staged.ok()) << staged.status().ToString();
    ASSERT_EQ(staged->inputs.size(), 2u);
    const int64_t* rewritten = staged->inputs[0].data<int64_t>();
    const float* got = staged->inputs[1].data<float>();
    std::set<int64_t> places, distinct;
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] < 0) {
        EXPECT_LT(rewritten[i], 0) << i;
        continue;
      }
      distinct.insert(values[i]);
      places.insert(rewritten[i]);
      ASSERT_GE(rewritten[i], 0);
      ASSERT_LT(rewritten[i], 320);
      for (int64_t d = 0; d < 4; ++d)
        ASSERT_EQ(got[rewritten[i] * 4 + d], rows.data<float>()[values[i] * 4 + d]) << i << " round " << round;
    }
    EXPECT_EQ(places.size(), distinct.size());  // one place per distinct row
    EXPECT_EQ(*places.rbegin(), static_cast<int64_t>(distinct.size()) - 1);
  }
  const DiskTableStats stats = (*disk)->stats()[0];
  EXPECT_EQ(stats.rows_read, stats.lookups - stats.hits);
  EXPECT_GE(stats.hits, stats.lookups / 2);  // the second run's rows all cached
}

// A model with its tables on disk, reloaded with a hotness snapshot, starts with the rows the last
// version's host caches held, and scores as with its tables in memory.
TEST(DiskTablesHotness, AReloadedModelStartsWarmAndScoresAsInMemory) {
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  const std::vector<InferRequest> requests = testing::ZooRequests("dlrm_dcnv2");
  const fs::path folder = fs::path(testing::WriteTempFile("disk_hotness/x", "")).parent_path();
  const std::string snapshot = (folder / "w1.hot").string();
  fs::remove(snapshot + ".disk");
  ModelOptions options;
  options.batching = 0;
  auto resident = Model::Load(dir, -1, options);
  ASSERT_TRUE(resident.ok()) << resident.status().ToString();
  const std::vector<std::vector<InferOutput>> want = testing::ScoreEach(**resident, requests);
  ASSERT_FALSE(::testing::Test::HasFailure());
  options.tables_on_disk = folder.string();
  options.table_disk_cache_mb = 1;
  options.table_hotness_snapshot = snapshot;
  int64_t held = 0;
  {
    auto first = Model::Load(dir, -1, options);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    ASSERT_NE((*first)->disk_tables(), nullptr);
    for (const InferRequest& r : requests) ASSERT_TRUE((*first)->Infer(r).ok());
    for (const DiskTableStats& t : (*first)->disk_tables()->stats()) held += t.cached;
    ASSERT_GT(held, 0);
  }
  ASSERT_TRUE(fs::exists(snapshot + ".disk"));
  auto second = Model::Load(dir, -1, options);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  (*second)->disk_tables()->WaitForWarmStart();
  int64_t cached = 0;
  uint64_t warmed = 0, read = 0;
  for (const DiskTableStats& t : (*second)->disk_tables()->stats()) {
    cached += t.cached, warmed += t.warmed, read += t.rows_read;
  }
  EXPECT_EQ(cached, held);
  EXPECT_GT(warmed, 0u);
  EXPECT_GE(read, warmed);  // the warm start's reads are counted with the runs

  for (size_t i = 0; i < requests.size(); ++i) {
    auto got = (*second)->Infer(requests[i]);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    testing::ExpectIdenticalOutputs(*got, want[i], "request " + std::to_string(i) + ", warm from the snapshot");
  }
  // The rows the first version read are all in the host caches: the second reads none of them.
  uint64_t read_after = 0;
  for (const DiskTableStats& t : (*second)->disk_tables()->stats()) read_after += t.rows_read;
  EXPECT_EQ(read_after, read);
}

}  // namespace
}  // namespace rankd
