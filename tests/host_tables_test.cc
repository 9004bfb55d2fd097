// Tables in host memory (the host tier): on a GPU every zoo model scores with them as with its tables
// on the device, tables from a mapped external-data file as in the file, and a load whose
// page-locked copies do not fit the host's available memory is refused.
#include <gtest/gtest.h>

#include <initializer_list>
#include <random>

#include "common/host_memory.h"
#include "embedding/table_budget.h"
#include "model/config.h"
#include "model/mapped_file.h"
#include "serving/model.h"
#include "test_util.h"
#if RANKD_HAVE_CUDA
#include "backend/cuda/faults.h"
#endif

namespace rankd {
namespace {

// Each of `models` scores requests of 1 and 37 rows (random floats from `seed`) exactly as `want`.
void ExpectScoresOf(const Model& want, std::initializer_list<const Model*> models, const std::string& name,
                    uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int64_t rows : {1, 37}) {
    InferRequest r = want.ExampleRequest(rows, 5);
    RandomizeFloats(r, static_cast<uint32_t>(rng()));
    auto expected = want.Infer(r);
    ASSERT_TRUE(expected.ok()) << name << ": " << expected.status().ToString();
    for (const Model* model : models) {
      auto got = model->Infer(r);
      ASSERT_TRUE(got.ok()) << name << ": " << got.status().ToString();
      for (size_t i = 0; i < expected->size(); ++i) {
        EXPECT_EQ(testing::RelativeError((*got)[i].data, (*expected)[i].data), 0) << name;
      }
    }
  }
}

// On the GPU, every zoo model with all its tables in host memory, and with every other table there,
// scores as with all of them on the device and as the CPU.
TEST(HostTables, TablesInHostMemoryScoreAsOnTheDevice) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  for (const std::string name : {"dlrm_dcnv2", "dlrm", "din", "bst", "mmoe"}) {
    const std::string dir = testing::SourcePath("models/zoo/" + name);
    ModelOptions options;
    options.backend = cuda;
    options.table_gpu_budget_mb = 0;
    auto host = Model::Load(dir, -1, options);
    ASSERT_TRUE(host.ok()) << name << ": " << host.status().ToString();
    EXPECT_GT(TierBytes((*host)->tables(), TableTier::kHost), 0) << name;
    testing::ExpectZooScores(**host, name, 1e-5);

    auto config = LoadModelConfig(dir);
    ASSERT_TRUE(config.ok());
    options.table_gpu_budget_mb.reset();
    auto device = Model::Load(dir, -1, options);
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    for (size_t i = 0; i < (*device)->tables().size(); i += 2) {
      if ((*device)->tables()[i].lookups_only) config->table_tiers[(*device)->tables()[i].name] = "host";
    }
    auto mixed = Model::LoadFile(dir + "/1/model.onnx", *config, options);
    ASSERT_TRUE(mixed.ok()) << name << ": " << mixed.status().ToString();
    testing::ExpectZooScores(**mixed, name, 1e-5);

    ExpectScoresOf(**device, {host->get(), mixed->get()}, name, 11);
  }
}

// Tables in a mapped external-data file: on a GPU they are copied into page-locked memory (locking
// page-cache pages in place can spin in the kernel), and score as the CPU reads them in place.
TEST(HostTables, TablesFromAMappedFileScoreAsInTheModelFile) {
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok());
  const std::string path = testing::WithExternalTables("dlrm_dcnv2");
  for (const Backend* backend : {&CpuBackend(), testing::CudaOrNull()}) {
    if (!backend) continue;
    ModelOptions options;
    options.backend = backend;
    options.table_gpu_budget_mb = 0;
    auto host = Model::LoadFile(path, *config, options);
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    EXPECT_EQ(TierBytes((*host)->tables(), TableTier::kDevice), 0);
    EXPECT_TRUE(MappedFile::Overlaps((*host)->graph().constants.at((*host)->tables()[0].value).raw(), 1));
    testing::ExpectZooScores(**host, "dlrm_dcnv2", 1e-5);
  }
}

TEST(HostMemory, ReadsMemAvailable) {
  auto parsed = ParseMemAvailable("MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:   2048 kB\n");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, 2048 * 1024);
  EXPECT_FALSE(ParseMemAvailable("MemTotal: 1 kB\n").ok());
  EXPECT_FALSE(ParseMemAvailable("MemAvailable: lots\n").ok());
  auto here = AvailableHostMemory();
  ASSERT_TRUE(here.ok()) << here.status().ToString();
  EXPECT_GT(*here, 0);
}

// Copies of mapped tables in page-locked memory must fit the host's available memory, or the load
// is refused saying so; with room, the same load serves.
TEST(HostTables, HostTablesThatDoNotFitTheHostAreRefused) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
#if RANKD_HAVE_CUDA && RANKD_FAULT_INJECTION
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok());
  const std::string path = testing::WithExternalTables("dlrm_dcnv2");
  ModelOptions options;
  options.backend = cuda;
  options.table_gpu_budget_mb = 0;
  cuda::DeviceFaults faults;
  faults.host_mb = 1;
  cuda::SetDeviceFaults(faults);
  auto refused = Model::LoadFile(path, *config, options);
  faults.host_mb = 4096;
  cuda::SetDeviceFaults(faults);
  auto fits = Model::LoadFile(path, *config, options);
  cuda::SetDeviceFaults(cuda::DeviceFaults{});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("MB of page-locked host memory; 1 MB are available"), std::string::npos)
      << refused.status().ToString();
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  testing::ExpectZooScores(**fits, "dlrm_dcnv2", 1e-5);
#else
  GTEST_SKIP() << "a build without fault injection";
#endif
}

}  // namespace
}  // namespace rankd
