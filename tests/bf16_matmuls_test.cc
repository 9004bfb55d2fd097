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

#include "compile/plan.h"
#include "runtime/backends.h"
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
    Graph g = testing::CrossNetwork(rows, 256, 512, 256, 2, rng);
    std::vector<Tensor> in = {testing::RandomF32({rows, 256}, rng)};
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

// Small weight matrices (under 131,072 values, or a side under 64) stay in fp32: bf16 precision
// scores a network of them exactly as fp32 does.
TEST(CpuBf16Products, SmallWeightsStayFp32) {
  std::mt19937_64 rng(6);
  for (int64_t rows : {1, 300}) {
    Graph g = testing::CrossNetwork(rows, 32, 1024, 48, 2, rng);  // [1024, 32] and [48, 1024]: a side under 64
    std::vector<Tensor> in = {testing::RandomF32({rows, 32}, rng)};
    auto fp32 = testing::RunGraph(g, in);
    auto bf16 = testing::RunGraph(g, in, {}, CpuBackend(), Precision::kBf16);
    ASSERT_TRUE(fp32.ok() && bf16.ok());
    EXPECT_EQ(LargestDifference(*bf16, *fp32), 0.0) << rows << " rows";
  }
}

// Executors of one model run its bf16 products at once from several threads (they share the
// model's weights and oneDNN primitives, made by whichever thread comes first): every answer is
// the one a single thread gives.
TEST(CpuBf16Products, ExecutorsSharingAModelRunAtOnceAsOneDoes) {
  std::mt19937_64 rng(7);
  const std::vector<int64_t> sizes = {5, 64, 200};
  std::vector<Graph> graphs;
  std::vector<std::vector<Tensor>> inputs, want;
  std::vector<std::shared_ptr<const Plan>> plans;
  Graph g = testing::CrossNetwork(1, 256, 512, 256, 2, rng);
  auto resources = CpuBackend().PrepareModel(g, Precision::kBf16);
  ASSERT_TRUE(resources.ok()) << resources.status().ToString();
  for (int64_t rows : sizes) {
    inputs.push_back({testing::RandomF32({rows, 256}, rng)});
    PlanOptions options;
    options.backend = &CpuBackend();
    auto plan = Plan::Build(g, {{DType::kF32, {rows, 256}, nullptr}}, options);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    plans.push_back(*plan);
    auto one = NewExecutor(CpuBackend(), *resources);
    ASSERT_TRUE(one.ok());
    auto out = (*one)->Run(*plans.back(), inputs.back());
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    want.push_back(std::move(*out));
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto executor = NewExecutor(CpuBackend(), *resources);
      for (int i = 0; executor.ok() && i < 20; ++i) {
        const size_t r = static_cast<size_t>(t + i) % sizes.size();
        auto out = (*executor)->Run(*plans[r], inputs[r]);
        if (!out.ok() || std::memcmp((*out)[0].raw(), want[r][0].raw(), want[r][0].bytes()) != 0) ++wrong;
      }
      if (!executor.ok()) ++wrong;
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
