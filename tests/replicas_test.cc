// A model replicated over several devices (docs/replicas.md): the config's gpus, replicas that
// score as one device does, load spread over them, and a replica whose device fails passed over
// while the others serve. On the host the replicas are CPU backends under other identities (one
// made to fail); the tests that need two GPUs skip on a machine with fewer.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "embedding/table_budget.h"
#include "model/config.h"
#include "model/onnx_import.h"
#include "onnx/onnx_pb.h"
#include "runtime/backends.h"
#include "runtime/mirrored_table_cache.h"
#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

GpuSet Gpus(const std::string& text) {
  auto gpus = ParseGpuSet(text);
  EXPECT_TRUE(gpus.ok()) << gpus.status().ToString();
  return gpus.ok() ? *gpus : GpuSet{};
}

TEST(Replicas, GpusInTheConfig) {
  auto listed = ParseModelConfig("gpus: [1, 0]\n", true);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->gpus.ids, (std::vector<int>{1, 0}));
  EXPECT_FALSE(listed->gpus.all);
  auto all = ParseModelConfig("{\"gpus\": \"all\"}", false);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_TRUE(all->gpus.all);
  auto one = ParseModelConfig("gpus: 3\n", true);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->gpus.ids, std::vector<int>{3});
  EXPECT_TRUE(ParseModelConfig("name: m\n", true)->gpus.empty());
  for (const char* bad : {"gpus: [0, 0]\n", "gpus: [-1]\n", "gpus: []\n", "gpus: some\n", "gpus: [0.5]\n",
                          "gpus: [64]\n", "gpus: {a: 1}\n"}) {
    auto refused = ParseModelConfig(bad, true);
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find("gpus"), std::string::npos) << bad << refused.status().ToString();
  }
  EXPECT_EQ(Gpus("0,1").ids, (std::vector<int>{0, 1}));
  EXPECT_EQ(GpuSetText(Gpus("2,0")), "2,0");
  EXPECT_EQ(GpuSetText(Gpus("all")), "all");
  for (const char* bad : {"", "0,", ",1", "0,,1", "x", "1,1", "0x1"}) {
    EXPECT_FALSE(ParseGpuSet(bad).ok()) << "'" << bad << "'";
  }
}

TEST(Replicas, GpusOnTheHostLeaveOneReplica) {
  auto backends = FindReplicaBackends(CpuBackend(), Gpus("0,1"));
  ASSERT_TRUE(backends.ok()) << backends.status().ToString();
  EXPECT_EQ(*backends, std::vector<const Backend*>{&CpuBackend()});
  ModelOptions options;
  options.gpus = Gpus("all");
  auto model = Model::Load(testing::SourcePath("models/zoo/din"), -1, options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_EQ((*model)->replicas().size(), 1u);
  EXPECT_EQ((*model)->replicas()[0].backend, "cpu");
}

// Requests of several sizes, scored by `model` from `threads` threads at once; each thread's
// scores in request order.
std::vector<std::vector<std::vector<InferOutput>>> ScoreFromThreads(const Model& model, int threads,
                                                                    const std::vector<InferRequest>& requests) {
  std::vector<std::vector<std::vector<InferOutput>>> scores(static_cast<size_t>(threads));
  std::vector<std::thread> workers;
  for (size_t t = 0; t < scores.size(); ++t) {
    workers.emplace_back([&, t] {
      for (const InferRequest& r : requests) {
        auto got = model.Infer(r);
        EXPECT_TRUE(got.ok()) << got.status().ToString();
        if (got.ok()) scores[t].push_back(std::move(*got));
      }
    });
  }
  for (std::thread& w : workers) w.join();
  return scores;
}

void ExpectSameScores(const std::vector<InferOutput>& got, const std::vector<InferOutput>& want, double tolerance,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t o = 0; o < want.size(); ++o) {
    EXPECT_EQ(got[o].name, want[o].name) << what;
    EXPECT_LE(testing::RelativeError(got[o].data, want[o].data), tolerance) << what << " output " << want[o].name;
  }
}

uint64_t Runs(const Model& model, size_t replica) { return model.replicas()[replica].runs; }

TEST(Replicas, HostReplicasScoreAsOneAndAFailedOneIsPassedOver) {
  const std::string dir = testing::SourcePath("models/zoo/mmoe");
  auto single = Model::Load(dir, -1);
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  testing::SwitchableHealthBackend first, second;
  ModelOptions options;
  options.replicas = {&first, &second};
  options.executors = 1;
  options.batching = 0;  // one run per request, counted below
  auto replicated = Model::Load(dir, -1, options);
  ASSERT_TRUE(replicated.ok()) << replicated.status().ToString();
  const Model& model = **replicated;
  ASSERT_EQ(model.replicas().size(), 2u);
  EXPECT_EQ(model.executors(), 1);  // per replica
  std::vector<InferRequest> requests;
  std::vector<std::vector<InferOutput>> want;
  for (int64_t rows : {1, 5, 33}) {
    requests.push_back(model.ExampleRequest(rows, 3));
    RandomizeFloats(requests.back(), static_cast<uint32_t>(rows));
    auto w = (*single)->Infer(requests.back());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    want.push_back(std::move(*w));
  }
  const uint64_t before = Runs(model, 0) + Runs(model, 1);
  auto scores = ScoreFromThreads(model, 4, requests);
  for (const auto& thread : scores) {
    ASSERT_EQ(thread.size(), requests.size());
    for (size_t q = 0; q < requests.size(); ++q) ExpectSameScores(thread[q], want[q], 1e-6, "replicated, both healthy");
  }
  EXPECT_EQ(Runs(model, 0) + Runs(model, 1), before + 4 * requests.size());

  // One replica's device fails: every request runs on the other, and the model still serves.
  first.Fail("GPU 0 met an unrecoverable error (simulated)");
  EXPECT_TRUE(model.CheckServable().ok());
  EXPECT_FALSE(model.replicas()[0].healthy);
  const uint64_t first_runs = Runs(model, 0), second_runs = Runs(model, 1);
  scores = ScoreFromThreads(model, 4, requests);
  for (const auto& thread : scores) {
    ASSERT_EQ(thread.size(), requests.size());
    for (size_t q = 0; q < requests.size(); ++q) ExpectSameScores(thread[q], want[q], 1e-6, "one replica failed");
  }
  EXPECT_EQ(Runs(model, 0), first_runs);
  EXPECT_EQ(Runs(model, 1), second_runs + 4 * requests.size());

  // Both failed: refused at once, naming why, and the model is not servable.
  second.Fail("GPU 1 met an unrecoverable error (simulated)");
  auto refused = model.Infer(requests[0]);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("GPU 0 met an unrecoverable error"), std::string::npos)
      << refused.status().ToString();
  EXPECT_FALSE(model.CheckServable().ok());
}

TEST(Replicas, BatchedModelKeepsEveryReplicaBusy) {
  testing::SwitchableHealthBackend first, second;
  ModelOptions options;
  options.replicas = {&first, &second};
  options.executors = 2;
  options.batching = 1;
  auto model = Model::Load(testing::SourcePath("models/zoo/din"), -1, options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  // The batcher runs as many batches at once as every replica has executors.
  auto single = Model::Load(testing::SourcePath("models/zoo/din"), -1);
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  InferRequest request = (*model)->ExampleRequest(9, 4);
  RandomizeFloats(request, 7);
  auto want = (*single)->Infer(request);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (const auto& thread : ScoreFromThreads(**model, 6, {request, request})) {
    for (const auto& got : thread) ExpectSameScores(got, *want, 1e-5, "batched over replicas");
  }
}

TEST(Replicas, GpusNameDevicesThatExist) {
  const int gpus = testing::GpuCount();
  if (gpus == 0) GTEST_SKIP() << "no CUDA device";
  auto all = FindReplicaBackends(*testing::CudaOrNull(), Gpus("all"));
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(static_cast<int>(all->size()), gpus);
  for (int d = 0; d < gpus; ++d) EXPECT_EQ((*all)[static_cast<size_t>(d)]->device(), d);
  auto absent = FindReplicaBackends(*testing::CudaOrNull(), Gpus("0," + std::to_string(gpus)));
  EXPECT_EQ(absent.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(absent.status().message().find("gpus: GPU " + std::to_string(gpus)), std::string::npos)
      << absent.status().ToString();
  ModelOptions options;
  options.backend = testing::CudaOrNull();
  options.gpus = Gpus(std::to_string(gpus));
  auto model = Model::Load(testing::SourcePath("models/zoo/din"), -1, options);
  EXPECT_EQ(model.status().code(), StatusCode::kUnavailable) << model.status().ToString();
}

// Every zoo model replicated on every GPU scores as on one, from threads keeping all of them busy.
class ReplicatedZooTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReplicatedZooTest, ScoresAsOneGpu) {
  const int gpus = testing::GpuCount();
  if (gpus < 2) GTEST_SKIP() << "fewer than two GPUs";
  const std::string dir = testing::SourcePath("models/zoo/" + GetParam());
  ModelOptions options;
  options.backend = testing::CudaOrNull();
  auto single = Model::Load(dir, -1, options);
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  options.gpus.all = true;
  auto replicated = Model::Load(dir, -1, options);
  ASSERT_TRUE(replicated.ok()) << replicated.status().ToString();
  ASSERT_EQ(static_cast<int>((*replicated)->replicas().size()), gpus);
  std::vector<InferRequest> requests;
  std::vector<std::vector<InferOutput>> want;
  for (int64_t rows : {1, 7, 64, 300}) {
    requests.push_back((*single)->ExampleRequest(rows, 5));
    RandomizeFloats(requests.back(), static_cast<uint32_t>(rows));
    auto w = (*single)->Infer(requests.back());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    want.push_back(std::move(*w));
  }
  for (const auto& thread : ScoreFromThreads(**replicated, 4 * gpus, requests)) {
    ASSERT_EQ(thread.size(), requests.size());
    for (size_t q = 0; q < requests.size(); ++q) ExpectSameScores(thread[q], want[q], 1e-6, GetParam());
  }
  for (const ReplicaState& r : (*replicated)->replicas()) EXPECT_GT(r.runs, 0u) << "GPU " << r.device << " ran nothing";
  // Every table in host memory: one page-locked copy, mapped for both replicas, read in place.
  options.table_gpu_budget_mb = 0;
  auto host = Model::Load(dir, -1, options);
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  for (const auto& thread : ScoreFromThreads(**host, 2 * gpus, requests)) {
    ASSERT_EQ(thread.size(), requests.size());
    for (size_t q = 0; q < requests.size(); ++q) ExpectSameScores(thread[q], want[q], 1e-6, GetParam() + " host");
  }
  // Every lookup table cached on each GPU, one keeper filling both alike.
  options.table_gpu_budget_mb.reset();
  options.table_cache_fraction = 0.25;
  auto cached = Model::Load(dir, -1, options);
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  ASSERT_NE((*cached)->cache_keeper(), nullptr);
  for (int round = 0; round < 2; ++round) {  // the second after the keeper has filled the caches
    for (const auto& thread : ScoreFromThreads(**cached, 2 * gpus, requests)) {
      ASSERT_EQ(thread.size(), requests.size());
      for (size_t q = 0; q < requests.size(); ++q) ExpectSameScores(thread[q], want[q], 1e-6, GetParam() + " cached");
    }
    ASSERT_TRUE((*cached)->cache_keeper()->Flush().ok());
  }
}

// A fake device cache: the rows its slots hold, and whether it takes fills.
class SlotsCache : public TableCache {
 public:
  explicit SlotsCache(int64_t capacity) : rows_(static_cast<size_t>(capacity), -1) {}
  int64_t capacity() const override { return static_cast<int64_t>(rows_.size()); }
  uint64_t Claim() override { return claims_.Claim(); }
  void Release(uint64_t claim) override { claims_.Release(claim); }
  bool Claimed(uint64_t claim) const override { return claims_.Decides(claim); }
  Status Apply(std::span<const Fill> fills, uint64_t claim) override {
    if (!claims_.Decides(claim)) return Status::Ok();
    if (failed_) return Unavailable("this cache's GPU failed");
    for (const Fill& f : fills) rows_[static_cast<size_t>(f.slot)] = f.row;
    return Status::Ok();
  }
  std::span<const int64_t> rows_of_slots() const override { return rows_; }
  bool failed_ = false;

 private:
  std::vector<int64_t> rows_;
  CacheClaims claims_;
};

TEST(Replicas, MirroredCachesTakeEveryFillAndOutliveAFailedOne) {
  SlotsCache first(4), second(4);
  MirroredTableCache mirrored({&first, &second});
  EXPECT_EQ(mirrored.capacity(), 4);
  const TableCache::Fill fills[] = {{0, 7}, {2, 9}, {0, 8}};
  const uint64_t claim = mirrored.Claim();
  ASSERT_TRUE(mirrored.Apply(fills, claim).ok());
  const std::vector<int64_t> want = {8, -1, 9, -1};
  EXPECT_EQ(std::vector<int64_t>(first.rows_of_slots().begin(), first.rows_of_slots().end()), want);
  EXPECT_EQ(std::vector<int64_t>(second.rows_of_slots().begin(), second.rows_of_slots().end()), want);
  // The first replica's GPU fails: the second goes on, and its rows are the ones reported.
  first.failed_ = true;
  const TableCache::Fill more[] = {{1, 5}};
  ASSERT_TRUE(mirrored.Apply(more, claim).ok());
  EXPECT_EQ(mirrored.rows_of_slots()[1], 5);
  EXPECT_EQ(first.rows_of_slots()[1], -1);
  second.failed_ = true;
  EXPECT_EQ(mirrored.Apply(more, claim).code(), StatusCode::kUnavailable);
}

// Another version's mirror claims the same caches: from then on its fills go in and the first's
// change nothing, until it gives its claim back.
TEST(Replicas, MirroredCachesFollowTheirLatestClaim) {
  SlotsCache first(4), second(4);
  MirroredTableCache old_version({&first, &second}), new_version({&first, &second});
  const uint64_t old_claim = old_version.Claim();
  const uint64_t new_claim = new_version.Claim();
  EXPECT_FALSE(old_version.Claimed(old_claim));
  EXPECT_TRUE(new_version.Claimed(new_claim));
  const TableCache::Fill stale[] = {{0, 1}}, fresh[] = {{1, 2}};
  ASSERT_TRUE(old_version.Apply(stale, old_claim).ok());
  ASSERT_TRUE(new_version.Apply(fresh, new_claim).ok());
  const std::vector<int64_t> want = {-1, 2, -1, -1};
  EXPECT_EQ(std::vector<int64_t>(first.rows_of_slots().begin(), first.rows_of_slots().end()), want);
  EXPECT_EQ(std::vector<int64_t>(second.rows_of_slots().begin(), second.rows_of_slots().end()), want);
  new_version.Release(new_claim);  // its load failed: the serving version decides again
  EXPECT_TRUE(old_version.Claimed(old_claim));
  ASSERT_TRUE(old_version.Apply(stale, old_claim).ok());
  EXPECT_EQ(first.rows_of_slots()[0], 1);
  EXPECT_EQ(second.rows_of_slots()[0], 1);
}

// Tables placed on named GPUs (tables.tiers' gpu:N, gpu:N,M), one copy read by every replica: on one
// GPU its own (the shared copy's path), on two the other GPU's over NVLink or rows split over both,
// for a model on one GPU and for one replicated on both; every zoo model.
class ShardedZooTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ShardedZooTest, TablesOnNamedGpusScoreAsResident) {
  const int gpus = testing::GpuCount();
  if (gpus == 0) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::SourcePath("models/zoo/" + GetParam());
  ModelOptions options;
  options.backend = testing::CudaOrNull();
  auto resident = Model::Load(dir, -1, options);
  ASSERT_TRUE(resident.ok()) << resident.status().ToString();
  std::vector<InferRequest> requests;
  std::vector<std::vector<InferOutput>> want;
  for (int64_t rows : {1, 64, 300}) {
    requests.push_back((*resident)->ExampleRequest(rows, 5));
    RandomizeFloats(requests.back(), static_cast<uint32_t>(rows));
    auto w = (*resident)->Infer(requests.back());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    want.push_back(std::move(*w));
  }
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  // On two GPUs: a third of the lookup tables with their rows split over both, a third on each.
  const char* places[] = {"gpu:0,1", "gpu:1", "gpu:0"};
  size_t placed_tables = 0;
  for (const TableInfo& t : (*resident)->tables()) {
    if (!t.lookups_only) continue;
    config->table_tiers[t.name] = gpus < 2 ? "gpu:0" : places[placed_tables % 3];
    ++placed_tables;
  }
  ASSERT_GT(placed_tables, 0u);
  for (const bool replicated : {false, true}) {
    if (replicated && gpus < 2) continue;
    ModelOptions placed_options = options;
    if (replicated) placed_options.gpus.all = true;
    auto placed = Model::LoadFile(dir + "/1/model.onnx", *config, placed_options);
    ASSERT_TRUE(placed.ok()) << placed.status().ToString();
    size_t named = 0;
    for (const TableInfo& t : (*placed)->tables()) named += !t.gpus.empty();
    EXPECT_EQ(named, placed_tables);
    for (const auto& thread : ScoreFromThreads(**placed, 4, requests)) {
      ASSERT_EQ(thread.size(), requests.size());
      for (size_t q = 0; q < requests.size(); ++q) {
        ExpectSameScores(thread[q], want[q], 1e-6, GetParam() + (replicated ? " replicated" : " on GPU 0"));
      }
    }
  }
}

// dlrm_dcnv2 with every table grown to kGrownRows rows of 8 floats (3 MiB), random, in a temporary
// model file: large enough that the budget places them over two GPUs (2 MiB granules).
constexpr int64_t kGrownRows = 98304;

std::string WithGrownTables(const std::string& name) {
  onnx::ModelProto m;
  std::ifstream in(testing::SourcePath("models/zoo/" + name + "/1/model.onnx"), std::ios::binary);
  EXPECT_TRUE(m.ParseFromIstream(&in));
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> uniform(-1, 1);
  int grown = 0;
  for (onnx::TensorProto& t : *m.mutable_graph()->mutable_initializer()) {
    if (t.name().rfind("tables.", 0) != 0 || t.dims_size() != 2) continue;
    std::vector<float> rows(static_cast<size_t>(kGrownRows * t.dims(1)));
    for (float& v : rows) v = uniform(rng);
    t.set_dims(0, kGrownRows);
    t.clear_float_data();
    t.set_raw_data(rows.data(), rows.size() * sizeof(float));
    ++grown;
  }
  EXPECT_EQ(grown, 26) << name;
  const std::string path = testing::WriteTempFile("grown_tables/" + name + "/model.onnx", "");
  std::ofstream(path, std::ios::binary) << m.SerializeAsString();
  return path;
}

// tables.shard_over_gpus on two GPUs: 26 tables of 3 MiB that no replica keeps under a 15 MiB
// budget, one named for a cache (its index and rows counted first). Largest first (all equal: by
// name), whole (4 MiB) on the GPU with the most room: three on each GPU, then one split over both
// (2 MiB on each), then nothing fits (0.6 MiB left) and the other 18 are read from host memory.
// The placement is checked on the host; replicated on both GPUs, with ids over all of every table's
// rows (a split table's upper rows on GPU 1), the model scores as with its tables resident on one.
// Each table's place as tables.tiers writes it ("gpu", "gpu:0", "gpu:0,1", "cache", "host"), counted.
std::map<std::string, int> CountPlaces(const std::vector<TableInfo>& tables) {
  std::map<std::string, int> places;
  for (const TableInfo& t : tables) {
    std::string place = TableTierName(t.tier);
    for (size_t g = 0; g < t.gpus.size(); ++g) place += (g ? "," : ":") + std::to_string(t.gpus[g]);
    ++places[place];
  }
  return places;
}

TEST(Replicas, TablesPlacedOverTheGpusByTheBudgetScoreAsResident) {
  const std::string path = WithGrownTables("dlrm_dcnv2");
  const std::map<std::string, int> want_places = {
      {"cache", 1}, {"gpu:0", 3}, {"gpu:1", 3}, {"gpu:0,1", 1}, {"host", 18}};
  auto graph = ImportOnnxFile(path);
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  TableBudget budget{15 << 20, {}};
  budget.cache_rows["tables.25.weight"] = 1000;
  budget.shard_gpus = {0, 1};
  auto tables = PlaceTables(*graph, budget);
  ASSERT_TRUE(tables.ok()) << tables.status().ToString();
  EXPECT_EQ(CountPlaces(*tables), want_places);
  if (testing::GpuCount() < 2) GTEST_SKIP() << "fewer than two GPUs";

  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ModelOptions options;
  options.backend = testing::CudaOrNull();
  auto resident = Model::LoadFile(path, *config, options);
  ASSERT_TRUE(resident.ok()) << resident.status().ToString();
  std::vector<InferRequest> requests;
  std::vector<std::vector<InferOutput>> want;
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> row(0, kGrownRows - 1);
  for (int64_t rows : {1, 64, 300}) {
    requests.push_back((*resident)->ExampleRequest(rows, 5));
    RandomizeFloats(requests.back(), static_cast<uint32_t>(rows));
    for (InferInput& in : requests.back().inputs) {
      if (in.data.dtype() != DType::kI64) continue;
      for (int64_t i = 0; i < in.data.size(); ++i) in.data.data<int64_t>()[i] = row(rng);
    }
    auto w = (*resident)->Infer(requests.back());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    want.push_back(std::move(*w));
  }
  config->table_gpu_budget_mb = 15;
  config->table_shard_over_gpus = true;
  config->table_cache_rows["tables.25.weight"] = 1000;
  options.gpus.all = true;
  auto placed = Model::LoadFile(path, *config, options);
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  EXPECT_EQ(CountPlaces((*placed)->tables()), want_places);
  ASSERT_NE((*placed)->cache_keeper(), nullptr);
  for (int round = 0; round < 2; ++round) {  // the second after the keeper has filled the cache
    for (const auto& thread : ScoreFromThreads(**placed, 4, requests)) {
      ASSERT_EQ(thread.size(), requests.size());
      for (size_t q = 0; q < requests.size(); ++q) ExpectSameScores(thread[q], want[q], 1e-6, "placed over the GPUs");
    }
    ASSERT_TRUE((*placed)->cache_keeper()->Flush().ok());
  }
  for (const ReplicaState& r : (*placed)->replicas()) EXPECT_GT(r.runs, 0u) << "GPU " << r.device << " ran nothing";
}

INSTANTIATE_TEST_SUITE_P(Zoo, ShardedZooTest,
                         ::testing::Values("dlrm_dcnv2", "din", "bst", "mmoe", "dlrm", "mmoe_strings"));

INSTANTIATE_TEST_SUITE_P(Zoo, ReplicatedZooTest,
                         ::testing::Values("dlrm_dcnv2", "din", "bst", "mmoe", "dlrm", "mmoe_strings"));

}  // namespace
}  // namespace rankd
