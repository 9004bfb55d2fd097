// The public headers alone are enough to embed rankd: this file includes nothing from src/.
#include <gtest/gtest.h>

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
  request.inputs.push_back({"sparse", rankd::Tensor::FromVector<int64_t>(rankd::DType::kI64, {3, 20}, ids), {}});
  request.inputs.push_back({"dense", rankd::Tensor::FromVector<float>(rankd::DType::kF32, {3, 10}, dense), {}});
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

}  // namespace
