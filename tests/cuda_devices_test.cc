// A CUDA backend per device: the index names a device that exists, and a model scores the same on
// every GPU. The tests that need two GPUs skip on a machine with one.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "runtime/backends.h"
#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

TEST(CudaDevices, OneBackendPerDevice) {
  const int gpus = testing::GpuCount();
  if (gpus == 0) GTEST_SKIP() << "no CUDA device";
  auto first = FindBackend("cuda");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((*first)->device(), 0);
  auto again = FindBackend("cuda", 0);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);  // one instance per device
  auto absent = FindBackend("cuda", gpus);
  EXPECT_EQ(absent.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(absent.status().message().find("there is no GPU " + std::to_string(gpus)), std::string::npos)
      << absent.status().ToString();
  for (int d = 1; d < gpus; ++d) {
    auto other = FindBackend("cuda", d);
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    EXPECT_NE(*other, *first);
    EXPECT_EQ((*other)->device(), d);
    EXPECT_TRUE((*other)->Health().ok());
  }
}

// Every zoo model on the second GPU scores as on the first, from threads using both at once.
class CudaDevicesZooTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaDevicesZooTest, ScoresTheSameOnEveryGpu) {
  if (testing::GpuCount() < 2) GTEST_SKIP() << "fewer than two GPUs";
  const std::string dir = testing::SourcePath("models/zoo/" + GetParam());
  std::vector<std::unique_ptr<Model>> models;
  for (int d = 0; d < 2; ++d) {
    ModelOptions options;
    auto backend = FindBackend("cuda", d);
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    options.backend = *backend;
    auto model = Model::Load(dir, -1, options);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    models.push_back(std::move(*model));
  }
  std::vector<InferRequest> requests;
  for (int64_t rows : {1, 7, 64}) requests.push_back(models[0]->ExampleRequest(rows));
  std::vector<std::vector<std::vector<InferOutput>>> scores(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (size_t d = 0; d < 2; ++d) {
    threads.emplace_back([&, d] {
      for (int round = 0; round < 5; ++round) {
        for (const InferRequest& r : requests) {
          auto got = models[d]->Infer(r);
          if (!got.ok()) {
            errors[d] = got.status().ToString();
            return;
          }
          if (round == 0) scores[d].push_back(*got);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  ASSERT_EQ(scores[1].size(), scores[0].size());
  for (size_t q = 0; q < scores[0].size(); ++q) {
    ASSERT_EQ(scores[1][q].size(), scores[0][q].size());
    for (size_t o = 0; o < scores[0][q].size(); ++o) {
      EXPECT_LE(testing::RelativeError(scores[1][q][o].data, scores[0][q][o].data), 1e-6)
          << GetParam() << " request " << q << " output " << o;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, CudaDevicesZooTest, ::testing::Values("dlrm_dcnv2", "din", "bst", "mmoe", "dlrm"));

}  // namespace
}  // namespace rankd
