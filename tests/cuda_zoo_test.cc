// The zoo models on the CUDA backend against the CPU backend, end to end: the reference requests and
// random ones with edge-case lengths, fused and unfused, W4s's strings hashed on the device, the
// reduced precisions within their tolerance, and concurrent requests on pooled executors. Skipped
// where no CUDA device is present (CI); run on the GPU machine.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if RANKD_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device.h"
#include "runtime/cuda/cuda_executor.h"
#endif
#include "common/host_allocator.h"
#include "compile/plan.h"
#include "cuda_op_cases.h"
#include "frontend/kserve_json.h"
#include "runtime/backends.h"
#include "serving/model.h"
#include "serving/string_ids.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::Random;

// Every zoo model: the reference requests and random ones with edge-case lengths, GPU vs CPU.
class CudaZooTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaZooTest, MatchesCpu) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::SourcePath("models/zoo/" + GetParam());
  ModelOptions gpu_options;
  gpu_options.backend = cuda;
  auto cpu = Model::Load(dir, -1);
  auto gpu = Model::Load(dir, -1, gpu_options);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  std::vector<InferRequest> requests;
  std::ifstream file(testing::SourcePath("tests/data/zoo/" + GetParam() + ".requests.jsonl"));
  for (std::string line; std::getline(file, line);) {
    auto r = ParseInferRequestJson(line);
    ASSERT_TRUE(r.ok());
    requests.push_back(*r);
  }
  // Random requests: ids across each table, ragged lengths including 0 and the longest allowed.
  std::mt19937_64 rng(7);
  for (int64_t rows : {1, 3, 64}) {
    InferRequest r = (*cpu)->ExampleRequest(rows);
    for (InferInput& in : r.inputs) {
      const InputConfig* cfg = (*cpu)->config().FindInput(in.name);
      if (cfg->ragged) {
        std::vector<int64_t> lengths;
        int64_t total = 0;
        for (size_t i = 0; i < in.lengths.size(); ++i) {
          int64_t len = i == 0   ? 0
                        : i == 1 ? std::min<int64_t>(cfg->max_length, 300)
                                 : static_cast<int64_t>(rng() % 20);
          lengths.push_back(len);
          total += len;
        }
        in.lengths = lengths;
        in.data = Random(in.data.dtype(), {total}, rng, 0, 40);
      } else {
        in.data = Random(in.data.dtype(), in.data.shape(), rng, 0, 40);
      }
    }
    requests.push_back(r);
  }
  for (size_t q = 0; q < requests.size(); ++q) {
    auto want = (*cpu)->Infer(requests[q]);
    auto got = (*gpu)->Infer(requests[q]);
    ASSERT_EQ(want.ok(), got.ok()) << "request " << q << ": " << want.status().ToString() << " / "
                                   << got.status().ToString();
    if (!want.ok()) continue;
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_LE(testing::RelativeError((*got)[i].data, (*want)[i].data), 1e-5) << GetParam() << " request " << q;
    }
  }
}

// W4s (mmoe_strings) with its strings hashed on the device: scores as the CPU's, which hashes with
// Debian's libraries, for strings of every length class, at sizes that pad to a bucket and not;
// the strings' bytes are copied into the pinned pool, which the GPU reads in place.
TEST(CudaBackend, StringsHashedOnTheDeviceScoreAsOnTheCpu) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::SourcePath("models/zoo/mmoe_strings");
  ModelOptions gpu_options;
  gpu_options.backend = cuda;
  auto cpu = Model::Load(dir, -1);
  auto gpu = Model::Load(dir, -1, gpu_options);
  ASSERT_TRUE(cpu.ok() && gpu.ok()) << gpu.status().ToString();
  std::mt19937_64 rng(31);
  for (int64_t rows : {1, 7, 64, 300}) {
    InferRequest r = (*cpu)->ExampleRequest(rows);
    for (InferInput& in : r.inputs) {
      if (in.is_bytes()) {
        PackedStrings s;
        s.shape = in.strings.shape;
        for (int64_t i = 0; i < NumElements(s.shape); ++i) {
          std::string v(rng() % 90, ' ');
          for (char& ch : v) ch = static_cast<char>(rng());
          s.Append(v);
        }
        in.strings = std::move(s);
      } else if (in.data.dtype() == DType::kI64) {
        for (int64_t i = 0; i < in.data.size(); ++i) in.data.data<int64_t>()[i] = static_cast<int64_t>(rng() % 100);
      } else {
        in.data = Random(in.data.dtype(), in.data.shape(), rng);
      }
    }
    if (rows == 1) {  // the pinned pool serves the strings' copy, so the device hashes them
      const InputConfig* cfg = (*gpu)->config().FindInput("categories");
      ASSERT_TRUE(cfg && cfg->HashedByBackend());
      RequestTensorScope scope;
      Tensor bytes;
      auto records = StringRecords(*cfg, r.inputs[1], true, bytes);
      ASSERT_TRUE(records.ok());
      ASSERT_TRUE(bytes.defined());
      EXPECT_EQ(bytes.location().kind, MemoryKind::kPinned);
    }
    auto want = (*cpu)->Infer(r);
    auto got = (*gpu)->Infer(r);
    ASSERT_TRUE(want.ok() && got.ok()) << want.status().ToString() << " / " << got.status().ToString();
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_LE(testing::RelativeError((*got)[i].data, (*want)[i].data), 1e-5) << rows << " rows, output " << i;
    }
  }
}

// Without the fusion passes the GPU scores as PyTorch too, and puts more kernels on the device.
TEST_P(CudaZooTest, UnfusedScoresTheSameWithMoreLaunches) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::SourcePath("models/zoo/" + GetParam());
  ModelOptions fused_options, unfused_options;
  fused_options.backend = unfused_options.backend = cuda;
  unfused_options.fusion = false;
  auto fused = Model::Load(dir, -1, fused_options);
  auto unfused = Model::Load(dir, -1, unfused_options);
  ASSERT_TRUE(fused.ok()) << fused.status().ToString();
  ASSERT_TRUE(unfused.ok()) << unfused.status().ToString();
  testing::ExpectZooScores(**unfused, GetParam(), 1e-5);
  InferRequest r = (*fused)->ExampleRequest(8, 3);
  auto fused_plan = (*fused)->PlanForRequest(r);
  auto unfused_plan = (*unfused)->PlanForRequest(r);
  ASSERT_TRUE(fused_plan.ok() && unfused_plan.ok());
  auto a = (*fused)->CountLaunches(**fused_plan);
  auto b = (*unfused)->CountLaunches(**unfused_plan);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_GT(a->kernels, 0);
  EXPECT_GE(a->copies, 1);  // one input copy in (outputs no step reads come back without one)
  EXPECT_EQ(a->other, 0);
  const LoadReport& report = (*fused)->load_report();
  if (report.fused_embedding_bags + report.fused_embedding_concats + report.fused_epilogues > 0) {
    EXPECT_LT(a->kernels, b->kernels);
  }
  // Counting does not capture: the plan still runs (and scores) as before.
  EXPECT_TRUE((*fused)->Infer(r).ok());
}

INSTANTIATE_TEST_SUITE_P(Zoo, CudaZooTest,
                         ::testing::Values("dlrm_dcnv2", "dlrm", "din", "bst", "bst_opset13", "mmoe"));

// Reduced-precision zoo models stay within their precision's tolerance of the fp32 CPU scores.
TEST(CudaBackend, ReducedPrecisionsStayWithinTheirTolerance) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  for (const char* name : {"dlrm_dcnv2", "din", "bst", "mmoe"}) {
    const std::string dir = testing::SourcePath(std::string("models/zoo/") + name);
    auto cpu = Model::Load(dir, -1);
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    InferRequest request = (*cpu)->ExampleRequest(64);
    std::mt19937_64 rng(3);
    for (InferInput& in : request.inputs) in.data = Random(in.data.dtype(), in.data.shape(), rng, 0, 10);
    auto want = (*cpu)->Infer(request);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    for (auto [precision, tolerance] :
         {std::pair{"tf32", 5e-3}, std::pair{"bf16", 3e-2}, std::pair{"bf16-activations", 3e-2}}) {
      ModelOptions options;
      options.backend = cuda;
      options.precision = precision;
      auto gpu = Model::Load(dir, -1, options);
      ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
      auto got = (*gpu)->Infer(request);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      double err = testing::RelativeError((*got)[0].data, (*want)[0].data);
      EXPECT_LE(err, tolerance) << name << " " << precision;
      EXPECT_GT(err, 0.0) << name << " " << precision << " rounds like fp32: is the precision applied?";
    }
  }
}

TEST(CudaBackend, ConcurrentRequestsOnPooledExecutors) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  ModelOptions options;
  options.backend = cuda;
  options.executors = 3;
  options.batching = 0;  // each request on an executor of its own, scored exactly as alone
  auto model = Model::Load(testing::SourcePath("models/zoo/din"), -1, options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  InferRequest request = (*model)->ExampleRequest(16);
  auto want = (*model)->Infer(request);
  ASSERT_TRUE(want.ok());
  // Each executor's thread waiting for its own runs, then all of them asleep while the device's
  // poller queries their events: every answer the same.
  for (bool poller : {false, true}) {
#if RANKD_HAVE_CUDA
    cuda::SetDeviceWait(poller ? cuda::DeviceWait::kPoller : cuda::DeviceWait::kNap);
#endif
    std::vector<std::thread> threads;
    std::atomic<int> mismatches{0}, failures{0};
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 50; ++i) {
          auto got = (*model)->Infer(request);
          if (!got.ok())
            ++failures;
          else if (testing::RelativeError((*got)[0].data, (*want)[0].data) != 0.0)
            ++mismatches;
        }
      });
    }
    for (auto& t : threads) t.join();
    const char* mode = poller ? "poller" : "nap";
    EXPECT_EQ(failures.load(), 0) << mode;
    EXPECT_EQ(mismatches.load(), 0) << mode;
  }
#if RANKD_HAVE_CUDA
  cuda::SetDeviceWait(cuda::DeviceWait::kPoller);  // the default
#endif
}

}  // namespace
}  // namespace rankd
