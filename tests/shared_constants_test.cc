// Constants held once by the models that have them byte for byte (compile/shared_constants.h): a
// second graph's equal tables view the first's storage, which outlives whichever unloads first; a
// changed table, a small weight and a graph's own equal constants stay apart; and a model version
// loaded beside the one it replaces scores the same from the tables it shares.
#include "compile/shared_constants.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "model/config.h"
#include "serving/model.h"
#include "test_util.h"

#if RANKD_HAVE_CUDA
#include "backend/cuda/device_health.h"
#include "backend/cuda/shared_device_copies.h"
#endif

namespace rankd {
namespace {

bool SameValues(const Tensor& a, const Tensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

struct Tables {
  Tensor table, other, small;
};

Tables MakeTables(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tables t;
  t.table = testing::RandomTable(DType::kF32, 1024, 64, rng);  // 256 KiB
  t.other = testing::RandomTable(DType::kF32, 1024, 64, rng);
  t.small = testing::RandomTable(DType::kF32, 16, 16, rng);  // 1 KiB: left alone
  return t;
}

Graph GraphOf(const Tables& t, const Tensor& other) {
  Graph g;
  g.AddConstant("table", t.table.Clone());
  g.AddConstant("other", other.Clone());
  g.AddConstant("small", t.small.Clone());
  return g;
}

const Tensor& Constant(const Graph& g, const std::string& name) { return g.constants.at(g.FindValue(name)); }

TEST(SharedConstants, EqualTablesOfTwoGraphsAreHeldOnceAndOutliveTheFirst) {
  const Tables a_tables = MakeTables(1), b_other = MakeTables(2);
  auto a = std::make_unique<Graph>(GraphOf(a_tables, a_tables.other));
  const size_t table_bytes = a_tables.table.bytes();
  // The first graph shares nothing, whatever it holds twice: its own equal constants stay apart.
  a->AddConstant("table_again", a_tables.table.Clone());
  EXPECT_EQ(ShareEqualConstants(*a), 0u);
  EXPECT_NE(Constant(*a, "table_again").raw(), Constant(*a, "table").raw());

  Graph b = GraphOf(a_tables, b_other.other);  // the same table and small weight, another `other`
  const void* b_own_table = Constant(b, "table").raw();
  EXPECT_EQ(ShareEqualConstants(b), table_bytes);
  const void* shared = Constant(b, "table").raw();  // either of the first graph's equal two
  EXPECT_TRUE(shared == Constant(*a, "table").raw() || shared == Constant(*a, "table_again").raw());
  EXPECT_NE(shared, b_own_table);
  // A graph holding the table twice shares each with a distinct one of the first graph's.
  Graph twice = GraphOf(a_tables, b_other.other);
  twice.AddConstant("table_again", a_tables.table.Clone());
  EXPECT_EQ(ShareEqualConstants(twice), 3 * table_bytes);  // `other` with b's
  EXPECT_NE(Constant(twice, "table").raw(), Constant(twice, "table_again").raw());
  EXPECT_NE(Constant(b, "other").raw(), Constant(*a, "other").raw());  // changed: its own
  EXPECT_NE(Constant(b, "small").raw(), Constant(*a, "small").raw());  // under the threshold
  EXPECT_TRUE(Constant(b, "table").owns());

  a.reset();  // the first model unloads: what the second shares stays (ASan checks the reads)
  EXPECT_TRUE(SameValues(Constant(b, "table"), a_tables.table));
  EXPECT_TRUE(SameValues(Constant(b, "other"), b_other.other));

  // A third graph finds the storage the second still holds.
  Graph c = GraphOf(a_tables, b_other.other);
  EXPECT_EQ(ShareEqualConstants(c), 2 * table_bytes);
  const void* again = Constant(c, "table").raw();
  EXPECT_TRUE(again == Constant(b, "table").raw() || again == Constant(twice, "table_again").raw() ||
              again == Constant(twice, "table").raw());
  EXPECT_EQ(Constant(c, "other").raw(), Constant(b, "other").raw());
}

TEST(SharedConstants, TablesNoModelHoldsAreForgotten) {
  const Tables t = MakeTables(3);
  auto first = std::make_unique<Graph>(GraphOf(t, t.other));
  ShareEqualConstants(*first);
  first.reset();
  Graph second = GraphOf(t, t.other);
  const void* own = Constant(second, "table").raw();
  EXPECT_EQ(ShareEqualConstants(second), 0u);
  EXPECT_EQ(Constant(second, "table").raw(), own);
  // A table that differs in its last byte alone is not shared.
  Graph third = GraphOf(t, t.other);
  Tensor& last = third.constants.at(third.FindValue("table"));
  last.data<uint8_t>()[last.bytes() - 1] ^= 1;
  EXPECT_EQ(ShareEqualConstants(third), Constant(third, "other").bytes());
  EXPECT_NE(Constant(third, "table").raw(), Constant(second, "table").raw());
}

// A model's directory of external tables copied (a new version's files, byte for byte the same
// but for `changed`, the file offset of a byte flipped in the copy; -1 for none).
std::string CopyOfModel(const std::string& onnx, const std::string& name, int64_t changed) {
  const std::filesystem::path from = std::filesystem::path(onnx).parent_path();
  const std::filesystem::path to =
      std::filesystem::path(testing::WriteTempFile(name + "/model.onnx", "")).parent_path();
  std::filesystem::copy(from, to,
                        std::filesystem::copy_options::overwrite_existing | std::filesystem::copy_options::recursive);
  if (changed >= 0) {
    std::fstream f(to / "tables.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(changed);
    char byte = 0;
    f.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x40);
    f.seekp(changed);
    f.write(&byte, 1);
  }
  return (to / "model.onnx").string();
}

// Versions of dlrm_dcnv2 with their tables in external-data files (the form a large model's
// tables take): a copy with no change holds every table once with the version it replaces, on
// the CPU and with the tables in host memory read by a GPU, and scores as the model does after that
// version unloads; a copy with its first table changed shares the rest.
TEST(SharedConstants, AVersionLoadedBesideTheOneItReplacesHoldsItsUnchangedTablesOnce) {
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok());
  const std::string v1 = testing::WithExternalTables("dlrm_dcnv2");
  const std::string same = CopyOfModel(v1, "shared_constants_same", -1);
  const std::string changed = CopyOfModel(v1, "shared_constants_changed", 0);
  for (const Backend* backend : {&CpuBackend(), testing::CudaOrNull()}) {
    if (!backend) continue;
    SCOPED_TRACE(backend->name());
    ModelOptions options;
    options.backend = backend;
    options.table_gpu_budget_mb = 0;  // on a GPU: the tables in host memory (the tier shared by address)
    auto first = Model::LoadFile(v1, *config, options);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    auto second = Model::LoadFile(same, *config, options);
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    const std::vector<TableInfo>& tables = (*first)->tables();
    ASSERT_GE(tables.size(), 2u);
    size_t table_bytes = 0;
    for (const TableInfo& t : tables) {
      const Tensor& mine = (*second)->graph().constants.at(t.value);
      if (mine.bytes() < kSharedConstantBytes) continue;
      table_bytes += mine.bytes();
      EXPECT_EQ(mine.raw(), (*first)->graph().constants.at(t.value).raw()) << t.name;
    }
    ASSERT_GT(table_bytes, 0u);
    EXPECT_GE((*second)->load_report().shared_constant_bytes, table_bytes);
    first->reset();
    testing::ExpectZooScores(**second, "dlrm_dcnv2", 1e-5);
    ASSERT_TRUE((*second)->CheckServable().ok());

    auto third = Model::LoadFile(changed, *config, options);
    ASSERT_TRUE(third.ok()) << third.status().ToString();
    const size_t shared = (*third)->load_report().shared_constant_bytes;
    EXPECT_GT(shared, 0u);
    EXPECT_LT(shared, (*second)->load_report().shared_constant_bytes);
  }
}

#if RANKD_HAVE_CUDA
// On a GPU with the tables resident: a version loaded beside the one it replaces reads the device
// copies of the tables it shares with it (its load takes no device memory for them) and scores the
// same from them once that version unloads; a version with one table changed holds that one itself.
TEST(SharedConstants, AVersionLoadedBesideTheOneItReplacesOnAGpuHoldsOneDeviceCopyOfItsUnchangedTables) {
  const Backend* gpu = testing::CudaOrNull();
  if (!gpu) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok());
  const std::string v1 = testing::WithExternalTables("dlrm_dcnv2");
  const std::string same = CopyOfModel(v1, "shared_device_copies_same", -1);
  const std::string changed = CopyOfModel(v1, "shared_device_copies_changed", 0);
  ModelOptions options;
  options.backend = gpu;
  int64_t at = cuda::BufferedDeviceBytes();
  auto first = Model::LoadFile(v1, *config, options);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const int64_t first_bytes = cuda::BufferedDeviceBytes() - at;
  at = cuda::BufferedDeviceBytes();
  auto second = Model::LoadFile(same, *config, options);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  const int64_t second_bytes = cuda::BufferedDeviceBytes() - at;
  int64_t table_bytes = 0;
  for (const TableInfo& t : (*first)->tables()) {
    const Tensor& mine = (*second)->graph().constants.at(t.value);
    if (mine.bytes() >= cuda::kSharedDeviceCopyBytes) table_bytes += static_cast<int64_t>(mine.bytes());
  }
  ASSERT_GT(table_bytes, 0);
  EXPECT_LE(second_bytes + table_bytes, first_bytes) << "the second version's load took device memory for its tables";
  first->reset();
  testing::ExpectZooScores(**second, "dlrm_dcnv2", 1e-5);

  at = cuda::BufferedDeviceBytes();
  auto third = Model::LoadFile(changed, *config, options);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  const int64_t third_bytes = cuda::BufferedDeviceBytes() - at;
  EXPECT_GT(third_bytes, second_bytes) << "the changed table needs a copy of its own";
  EXPECT_LT(third_bytes, first_bytes) << "the unchanged tables need none";
  std::vector<std::vector<InferOutput>> want;
  for (const InferRequest& q : testing::ZooRequests("dlrm_dcnv2")) {
    auto got = (*third)->Infer(q);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    want.push_back(std::move(*got));
  }
  second->reset();  // the last other holder of the copies the third version reads
  const std::vector<InferRequest> requests = testing::ZooRequests("dlrm_dcnv2");
  for (size_t i = 0; i < requests.size(); ++i) {
    auto got = (*third)->Infer(requests[i]);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    testing::ExpectIdenticalOutputs(*got, want[i], "request " + std::to_string(i));
  }
}
#endif

}  // namespace
}  // namespace rankd
