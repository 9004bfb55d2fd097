// The CPU's products by packed weights (backend/cpu/packed_matmuls.h): in fp32 as sgemm's within
// rounding, at bf16 precision (where the CPU multiplies bf16) within bf16's rounding of fp32, small
// weights left to sgemm, and several executors of one model running them at once.
#include "backend/cpu/packed_matmuls.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "backend/cpu/host_resources.h"
#include "backend/cpu/kernels.h"
#include "common/parallel.h"
#include "compile/plan.h"
#include "runtime/backends.h"
#include "runtime/executor.h"
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

// The graph on the CPU without a model's resources: every product in sgemm.
StatusOr<std::vector<Tensor>> RunInSgemm(const Graph& g, const std::vector<Tensor>& in) {
  PlanOptions options;
  options.backend = &CpuBackend();
  RANKD_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan,
                         Plan::Build(g, {{in[0].dtype(), in[0].shape(), nullptr}}, options));
  RANKD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, NewExecutor(CpuBackend(), nullptr));
  return executor->Run(*plan, in);
}

// In fp32 a cross network's five large weight matrices (of its six) are packed, and its scores are
// sgemm's within fp32 rounding, from one row to hundreds.
TEST(CpuSgemm, SmallAndLargeProductsMatchTheSumsAndKeepTheThreads) {
  // 4 x 128 x 256 runs on the calling thread alone (under kOneThreadSgemmMacs), 64 x 128 x 256 on
  // the team; both against a double-precision reference, and the thread count as it was after each.
  ScopedOmpThreads threads(4);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (int64_t m : {4, 64}) {
    const int64_t n = 128, k = 256;
    ASSERT_EQ(m * n * k < cpu::kOneThreadSgemmMacs, m == 4);
    std::vector<float> a(m * k), b(k * n), c(m * n, 0.0f);
    for (float& x : a) x = value(rng);
    for (float& x : b) x = value(rng);
    cpu::Sgemm(a.data(), b.data(), c.data(), m, n, k, false, false, 1.0f, 0.0f);
    EXPECT_EQ(omp_get_max_threads(), 4);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += static_cast<double>(a[i * k + p]) * b[p * n + j];
        ASSERT_NEAR(c[i * n + j], sum, 1e-3) << "m " << m << " at " << i << "," << j;
      }
    }
  }
}

TEST(CpuPackedProducts, Fp32ScoresAsSgemmWithinRounding) {
  std::mt19937_64 rng(4);
  Graph probe = testing::CrossNetwork(1, 256, 512, 256, 2, rng);
  auto resources = CpuBackend().PrepareModel(probe, Precision::kFp32);
  ASSERT_TRUE(resources.ok()) << resources.status().ToString();
  const auto* host = dynamic_cast<const cpu::HostModelResources*>(resources->get());
  ASSERT_NE(host, nullptr);
  ASSERT_NE(host->packed_matmuls(), nullptr);
  EXPECT_EQ(host->packed_matmuls()->weights(), 5);  // w0, down and up of two layers; not the score's [1, 512]
  EXPECT_FALSE(host->packed_matmuls()->bf16());
  for (int64_t rows : {1, 3, 37, 300}) {
    Graph g = testing::CrossNetwork(rows, 256, 512, 256, 2, rng);
    std::vector<Tensor> in = {testing::RandomF32({rows, 256}, rng)};
    auto packed = testing::RunGraph(g, in);
    auto sgemm = RunInSgemm(g, in);
    ASSERT_TRUE(packed.ok() && sgemm.ok());
    testing::ExpectOutputsNear(*packed, *sgemm, 1e-5, std::to_string(rows) + " rows");
  }
}

// A cross network's Gemms (B transposed, with and without C) at bf16, from one row to hundreds: within bf16's rounding
// of fp32, and not equal to it where the CPU has bf16 products (the path ran), equal where it has not.
TEST(CpuPackedProducts, ACrossNetworkScoresWithinBf16RoundingOfFp32) {
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

// Small weight matrices (under 131,072 values, or a side under 64) are left to sgemm: bf16
// precision scores a network of them exactly as fp32 does.
TEST(CpuPackedProducts, SmallWeightsAreLeftToSgemm) {
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

// Executors of one model run its packed bf16 products at once from several threads (they share the
// model's weights and oneDNN primitives, made by whichever thread comes first): every answer is
// the one a single thread gives.
TEST(CpuPackedProducts, ExecutorsSharingAModelRunAtOnceAsOneDoes) {
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
TEST(CpuPackedProducts, ZooModelsScoreWithinBf16Rounding) {
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
