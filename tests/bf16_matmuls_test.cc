// The CPU's bf16 products (backend/cpu/bf16_matmuls.h): taken at bf16 precision where the CPU
// multiplies bf16, within bf16's rounding of the fp32 scores, and left in fp32 where they do not
// qualify.
#include "backend/cpu/bf16_matmuls.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

double LargestDifference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double most = 0;
  for (size_t o = 0; o < a.size(); ++o) {
    for (int64_t i = 0; i < a[o].size(); ++i) {
      most = std::max(most, static_cast<double>(std::fabs(a[o].data<float>()[i] - b[o].data<float>()[i])));
    }
  }
  return most;
}

// A cross network's Gemms (B transposed, with and without C) at bf16, from one row to hundreds: within bf16's rounding
// of fp32, and not equal to it where the CPU has bf16 products (the path ran), equal where it has not.
TEST(CpuBf16Products, ACrossNetworkScoresWithinBf16RoundingOfFp32) {
  std::mt19937_64 rng(5);
  for (int64_t rows : {1, 3, 37, 300}) {
    Graph g = testing::CrossNetwork(rows, 64, 96, 24, 3, rng);
    std::vector<Tensor> in = {testing::RandomF32({rows, 64}, rng)};
    auto fp32 = testing::RunGraph(g, in);
    ASSERT_TRUE(fp32.ok()) << fp32.status().ToString();
    for (Precision p : {Precision::kBf16, Precision::kBf16Activations}) {
      auto bf16 = testing::RunGraph(g, in, {}, CpuBackend(), p);
      ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
      const std::string what = std::to_string(rows) + " rows at " + PrecisionName(p);
      testing::ExpectOutputsNear(*bf16, *fp32, 3e-2, what);
      if (cpu::HostHasBf16Matmuls()) {
        EXPECT_GT(LargestDifference(*bf16, *fp32), 0.0) << what << ": the products stayed in fp32";
      } else {
        EXPECT_EQ(LargestDifference(*bf16, *fp32), 0.0) << what;
      }
    }
  }
}

// The same graph run at once from several threads (executors share the model's products and
// their oneDNN primitives) scores as one thread does.
TEST(CpuBf16Products, ThreadsSharingAModelScoreAsOneDoes) {
  std::mt19937_64 rng(7);
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  ModelOptions options;
  options.precision = "bf16";
  auto model = Model::Load(dir, -1, options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<InferRequest> requests;
  std::vector<std::vector<InferOutput>> want;
  for (int64_t rows : {5, 64, 200}) {
    requests.push_back((*model)->ExampleRequest(rows));
    auto out = (*model)->Infer(requests.back());
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    want.push_back(std::move(*out));
  }
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const size_t r = static_cast<size_t>(t + i) % requests.size();
        auto out = (*model)->Infer(requests[r]);
        if (!out.ok() || (*out)[0].data.bytes() != want[r][0].data.bytes() ||
            std::memcmp((*out)[0].data.raw(), want[r][0].data.raw(), want[r][0].data.bytes()) != 0) {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

// The zoo's DCNv2 (Gemms and MatMuls) and DIN at bf16 on the CPU score their reference requests
// within bf16's rounding of the reference (fp32) scores.
TEST(CpuBf16Products, ZooModelsScoreWithinBf16Rounding) {
  for (const char* name : {"dlrm_dcnv2", "din"}) {
    ModelOptions options;
    options.precision = "bf16";
    auto model = Model::Load(testing::SourcePath(std::string("models/zoo/") + name), -1, options);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    testing::ExpectZooScores(**model, name, 3e-2);
  }
}

}  // namespace
}  // namespace rankd
