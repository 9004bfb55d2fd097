// The public headers alone are enough to embed rankd: this file includes nothing from src/.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "rankd/engine.h"

namespace rankd::testing {
// A path in the source tree the run names (test_util.h; declared here so this file stays free of
// src/ headers).
std::string SourcePath(const std::string& relative);
}  // namespace rankd::testing

namespace {

TEST(PublicApi, LoadDescribeAndScoreFromManyThreads) {
  auto engine = rankd::Engine::Load(rankd::testing::SourcePath("models/zoo/mmoe"));
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->name(), "mmoe");
  EXPECT_EQ((*engine)->version(), 1);
  auto inputs = (*engine)->inputs();
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].name, "sparse");
  EXPECT_EQ(inputs[0].dims, std::vector<int64_t>({20}));
  auto outputs = (*engine)->outputs();
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].name, "ctr");
  EXPECT_EQ(outputs[1].name, "cvr");
  EXPECT_EQ(outputs[1].dtype, rankd::DType::kF32);

  rankd::InferRequest request;
  std::vector<int64_t> ids(3 * 20);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 7 % 100);
  std::vector<float> dense(3 * 10);
  for (size_t i = 0; i < dense.size(); ++i) dense[i] = 0.1f * static_cast<float>(i);
  request.inputs.push_back({"sparse", rankd::Tensor::FromVector<int64_t>(rankd::DType::kI64, {3, 20}, ids), {}, {}});
  request.inputs.push_back({"dense", rankd::Tensor::FromVector<float>(rankd::DType::kF32, {3, 10}, dense), {}, {}});
  auto first = (*engine)->Infer(request);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ((*first)[0].data.shape(), rankd::Shape({3, 1}));

  // Concurrent callers get identical answers.
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        auto out = (*engine)->Infer(request);
        if (!out.ok() || (*out)[1].data.data<float>()[2] != (*first)[1].data.data<float>()[2]) ++mismatches[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);

  request.inputs[0].data.data<int64_t>()[5] = 100;  // table has 100 rows
  auto bad = (*engine)->Infer(request);
  EXPECT_EQ(bad.status().code(), rankd::StatusCode::kInvalidArgument);
}

// EngineOptions: the backend by name, batching turned on over a config without it (merged requests
// score as alone), and options that cannot work refused with a reason.
TEST(PublicApi, CreateTakesBackendBatchingAndExecutors) {
  rankd::EngineOptions options;
  options.model_dir = rankd::testing::SourcePath("models/zoo/mmoe");
  auto plain = rankd::Engine::Create(options);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ((*plain)->backend(), "cpu");
  options.backend = "auto";  // the CPU here, a GPU where there is one
  options.batching = 1;
  options.executors = 2;
  auto batched = rankd::Engine::Create(options);
  ASSERT_TRUE(batched.ok()) << batched.status().ToString();
  EXPECT_TRUE((*batched)->backend() == "cpu" || (*batched)->backend() == "cuda") << (*batched)->backend();

  std::vector<rankd::InferRequest> requests(6);
  for (size_t r = 0; r < requests.size(); ++r) {
    const int64_t rows = static_cast<int64_t>(r) + 1;
    std::vector<int64_t> ids(static_cast<size_t>(rows) * 20);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 13 + r) % 100);
    std::vector<float> dense(static_cast<size_t>(rows) * 10);
    for (size_t i = 0; i < dense.size(); ++i) dense[i] = 0.01f * static_cast<float>(i + r);
    requests[r].inputs.push_back(
        {"sparse", rankd::Tensor::FromVector<int64_t>(rankd::DType::kI64, {rows, 20}, ids), {}, {}});
    requests[r].inputs.push_back(
        {"dense", rankd::Tensor::FromVector<float>(rankd::DType::kF32, {rows, 10}, dense), {}, {}});
  }
  std::vector<std::thread> threads;
  std::vector<int> wrong(requests.size(), 0);
  for (size_t r = 0; r < requests.size(); ++r) {
    threads.emplace_back([&, r] {
      auto want = (*plain)->Infer(requests[r]);
      for (int i = 0; i < 20; ++i) {
        auto got = (*batched)->Infer(requests[r]);
        if (!want.ok() || !got.ok() || got->size() != want->size()) {
          ++wrong[r];
          continue;
        }
        for (size_t o = 0; o < got->size(); ++o) {
          const float* a = (*got)[o].data.data<float>();
          const float* b = (*want)[o].data.data<float>();
          for (int64_t k = 0; k < (*got)[o].data.size(); ++k)
            wrong[r] += std::abs(a[k] - b[k]) > 1e-3f * (1 + std::abs(b[k]));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t r = 0; r < wrong.size(); ++r) EXPECT_EQ(wrong[r], 0) << "request " << r;

  rankd::EngineOptions bad;
  EXPECT_EQ(rankd::Engine::Create(bad).status().code(), rankd::StatusCode::kInvalidArgument);  // no model_dir
  bad.model_dir = options.model_dir;
  bad.backend = "tpu";
  auto unknown = rankd::Engine::Create(bad);
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("tpu"), std::string::npos) << unknown.status().ToString();
  bad.backend = "cpu";
  bad.batching = 7;
  EXPECT_EQ(rankd::Engine::Create(bad).status().code(), rankd::StatusCode::kInvalidArgument);
  bad.batching = -1;
  bad.precision = "fp8";
  EXPECT_FALSE(rankd::Engine::Create(bad).ok());
}

// EngineOptions::device: the CPU is device 0 only; a GPU index names one that exists, and "auto"
// falls back to the CPU only for device 0 (a named GPU that is absent is an error, not the CPU).
TEST(PublicApi, DeviceIndexNamesAnExistingDevice) {
  rankd::EngineOptions options;
  options.model_dir = rankd::testing::SourcePath("models/zoo/mmoe");
  auto cpu = rankd::Engine::Create(options);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_EQ((*cpu)->device(), 0);
  options.device = 1;
  auto second_cpu = rankd::Engine::Create(options);
  EXPECT_EQ(second_cpu.status().code(), rankd::StatusCode::kInvalidArgument) << second_cpu.status().ToString();
  EXPECT_NE(second_cpu.status().message().find("one device"), std::string::npos) << second_cpu.status().ToString();
  options.device = -1;
  EXPECT_EQ(rankd::Engine::Create(options).status().code(), rankd::StatusCode::kInvalidArgument);
  options.backend = "auto";
  options.device = 63;  // more GPUs than any machine here has
  auto absent = rankd::Engine::Create(options);
  EXPECT_EQ(absent.status().code(), rankd::StatusCode::kUnavailable) << absent.status().ToString();
  options.device = 0;
  auto first = rankd::Engine::Create(options);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((*first)->device(), 0);
}

}  // namespace
