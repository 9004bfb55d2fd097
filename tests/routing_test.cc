// Runs routed between a model's device and its plans on the CPU (docs/routing.md): the policy
// alone, the config, and models that route. On the host the device is the CPU backend under
// another identity (testing::SwitchableHealthBackend), which a test makes fail; the test on a
// real GPU skips without one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "frontend/triton_config.h"
#include "model/config.h"
#include "serving/metrics.h"
#include "serving/model.h"
#include "serving/repository.h"
#include "serving/route_policy.h"
#include "test_util.h"

namespace rankd {
namespace {

RoutePolicy CostPolicy() {
  RoutePolicy p;
  p.mode = CpuRouting::kCost;
  p.device = {/*per_row=*/0.1, /*per_sequence_element=*/0, /*per_request=*/100, 0};
  p.cpu = {/*per_row=*/10, /*per_sequence_element=*/0, /*per_request=*/20, 0};
  return p;
}

TEST(RoutePolicy, OffKeepsEveryRunOnTheDevice) {
  RoutePolicy off;
  RouteLoad load;
  load.device_healthy = false;
  EXPECT_EQ(ChooseRoute(off, load, 1, 0), Route::kDevice);
}

TEST(RoutePolicy, AFailedDeviceSendsEveryRunToTheCpuWhateverItsRuns) {
  RouteLoad load;
  load.device_healthy = false;
  load.cpu_busy = 5;
  load.cpu_runs = 1;
  for (CpuRouting mode : {CpuRouting::kFallback, CpuRouting::kRows, CpuRouting::kCost}) {
    RoutePolicy p = CostPolicy();
    p.mode = mode;
    p.max_rows = 1;
    EXPECT_EQ(ChooseRoute(p, load, 1000, 0), Route::kCpuFallback) << CpuRoutingName(mode);
  }
  load.device_healthy = true;
  RoutePolicy fallback;
  fallback.mode = CpuRouting::kFallback;
  load.cpu_busy = 0;
  EXPECT_EQ(ChooseRoute(fallback, load, 1, 0), Route::kDevice);
}

TEST(RoutePolicy, RowsSendsSmallRunsToAFreeCpuRun) {
  RoutePolicy p;
  p.mode = CpuRouting::kRows;
  p.max_rows = 16;
  RouteLoad load;
  load.cpu_runs = 2;
  EXPECT_EQ(ChooseRoute(p, load, 16, 100), Route::kCpu);
  EXPECT_EQ(ChooseRoute(p, load, 17, 0), Route::kDevice);
  load.cpu_busy = 2;  // every CPU run taken: the device, not a queue on the CPU
  EXPECT_EQ(ChooseRoute(p, load, 1, 0), Route::kDevice);
}

TEST(RoutePolicy, CostWeighsTheDevicesQueue) {
  RoutePolicy p = CostPolicy();
  RouteLoad load;
  load.device_executors = 4;
  load.cpu_runs = 1;
  // Idle device: 100.1 µs against the CPU's 30 for one row; 100.9 against 110 for nine.
  EXPECT_EQ(ChooseRoute(p, load, 1, 0), Route::kCpu);
  EXPECT_EQ(ChooseRoute(p, load, 9, 0), Route::kDevice);
  EXPECT_DOUBLE_EQ(DeviceFinishMicros(p, load, 9, 0), 100.9);
  // Four runs on four executors: this one waits for a quarter of a run more.
  load.device_busy = 4;
  EXPECT_DOUBLE_EQ(DeviceFinishMicros(p, load, 9, 0), 100.9 * 1.25);
  EXPECT_EQ(ChooseRoute(p, load, 9, 0), Route::kCpu);
  EXPECT_EQ(ChooseRoute(p, load, 100, 0), Route::kDevice);  // 1,020 µs on the CPU against 137.5
  load.device_busy = 40;                                    // 37 runs ahead: 10.25 runs' time
  EXPECT_EQ(ChooseRoute(p, load, 100, 0), Route::kCpu);
  load.cpu_busy = 1;
  EXPECT_EQ(ChooseRoute(p, load, 1, 0), Route::kDevice);
  load.cpu_busy = 0;
  load.device_executors = 0;  // no limit: never a queue
  EXPECT_DOUBLE_EQ(DeviceFinishMicros(p, load, 8, 0), 100.8);
  p.cpu.per_sequence_element = 1;  // ids weigh on the CPU
  EXPECT_EQ(ChooseRoute(p, load, 1, 500), Route::kDevice);
}

TEST(RoutingConfig, ParsesAndRefuses) {
  auto rows = ParseModelConfig("routing: {cpu: rows, cpu_max_rows: 32, cpu_runs: 3}\n", true);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(rows->routing.cpu, CpuRouting::kRows);
  EXPECT_EQ(rows->routing.cpu_max_rows, 32);
  EXPECT_EQ(rows->routing.cpu_runs, 3);
  auto none = ParseModelConfig("name: m\n", true);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->routing.cpu, CpuRouting::kOff);
  EXPECT_EQ(none->routing.cpu_runs, 1);
  for (const char* good : {"routing: {cpu: cost}\n", "routing: {cpu: fallback}\n", "routing: {cpu: off}\n"}) {
    EXPECT_TRUE(ParseModelConfig(good, true).ok()) << good;
  }
  for (const char* bad : {"routing: {cpu: gpu}\n", "routing: {cpu: rows}\n", "routing: {cpu: cost, cpu_max_rows: 4}\n",
                          "routing: {cpu: rows, cpu_max_rows: 0}\n", "routing: {cpu: cost, cpu_runs: 0}\n",
                          "routing: {cpu: cost, cpu_runs: 1.5}\n", "routing: {cpu: cost, cpus: 2}\n", "routing: cost\n",
                          "routing: {cpu: 1}\n"}) {
    auto refused = ParseModelConfig(bad, true);
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find("routing"), std::string::npos) << bad << refused.status().ToString();
  }
}

// `dir`'s model on a stand-in device, with `routing` (YAML) added to its config.
StatusOr<std::unique_ptr<Model>> LoadRouted(const std::string& dir, const std::string& routing, const Backend& device,
                                            int batching) {
  RANKD_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));
  RANKD_ASSIGN_OR_RETURN(ModelConfig with, ParseModelConfig("routing: " + routing + "\n", true));
  config.routing = with.routing;
  ModelOptions options;
  options.config = config;
  options.backend = &device;  // compiled for it, as a server compiles for its backend
  options.replicas = {&device};
  options.batching = batching;
  return Model::Load(dir, -1, options);
}

// Requests of 1 to 40 rows with ragged rows of 3 ids and random dense values.
std::vector<InferRequest> Requests(const Model& model) {
  std::vector<InferRequest> requests;
  for (int64_t rows : {1, 2, 4, 5, 40}) {
    requests.push_back(model.ExampleRequest(rows, 3));
    RandomizeFloats(requests.back(), static_cast<uint32_t>(rows));
  }
  return requests;
}

void ExpectScoresOf(const Model& model, const std::vector<InferRequest>& requests,
                    const std::vector<std::vector<InferOutput>>& want, const std::string& what) {
  for (size_t q = 0; q < requests.size(); ++q) {
    auto got = model.Infer(requests[q]);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
    ASSERT_EQ(got->size(), want[q].size());
    for (size_t o = 0; o < got->size(); ++o) {
      EXPECT_LE(testing::RelativeError((*got)[o].data, want[q][o].data), 1e-5) << what << " request " << q;
    }
  }
}

std::vector<std::vector<InferOutput>> ScoresOnTheCpu(const std::string& dir,
                                                     const std::vector<InferRequest>& requests) {
  auto plain = Model::Load(dir, -1);
  EXPECT_TRUE(plain.ok()) << plain.status().ToString();
  std::vector<std::vector<InferOutput>> want;
  for (const InferRequest& r : requests) {
    auto w = (*plain)->Infer(r);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    want.push_back(w.ok() ? std::move(*w) : std::vector<InferOutput>{});
  }
  return want;
}

TEST(Routing, RowsSendsRunsOfFewRowsToTheCpu) {
  const std::string dir = testing::SourcePath("models/zoo/din");
  testing::SwitchableHealthBackend device;
  auto model = LoadRouted(dir, "{cpu: rows, cpu_max_rows: 4}", device, /*batching=*/0);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Model& m = **model;
  ASSERT_NE(m.cpu_route(), nullptr);
  const std::vector<InferRequest> requests = Requests(m);
  ExpectScoresOf(m, requests, ScoresOnTheCpu(dir, requests), "routed by rows");
  // Load-time runs are not counted; 1, 2 and 4 rows went to the CPU, 5 and 40 to the device.
  const RouteCounts counts = m.cpu_route()->counts();
  EXPECT_EQ(counts.cpu.runs, 3u);
  EXPECT_EQ(counts.cpu.rows, 7u);
  EXPECT_EQ(counts.device.runs, 2u);
  EXPECT_EQ(counts.device.rows, 45u);
  EXPECT_EQ(counts.fallbacks, 0u);
  EXPECT_EQ(counts.cpu.latency.count, 3u);
  EXPECT_GT(counts.device.latency.sum_seconds, 0);
  // The model configuration API shows the routing among rankd's own keys.
  const inference::ModelConfig triton = TritonModelConfig(m);
  EXPECT_EQ(triton.parameters().at("routing.cpu").string_value(), "rows");
  EXPECT_EQ(triton.parameters().at("routing.cpu_max_rows").string_value(), "4");
  EXPECT_EQ(triton.parameters().at("routing.cpu_runs").string_value(), "1");
}

TEST(Routing, AFailedDeviceFallsBackToTheCpuWithNoFailedRequest) {
  const std::string dir = testing::SourcePath("models/zoo/mmoe");
  testing::SwitchableHealthBackend device, alone;
  auto model = LoadRouted(dir, "{cpu: fallback}", device, /*batching=*/-1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto unrouted = LoadRouted(dir, "{cpu: off}", alone, /*batching=*/-1);
  ASSERT_TRUE(unrouted.ok()) << unrouted.status().ToString();
  EXPECT_EQ((*unrouted)->cpu_route(), nullptr);
  const Model& m = **model;
  const std::vector<InferRequest> requests = Requests(m);
  const auto want = ScoresOnTheCpu(dir, requests);
  ExpectScoresOf(m, requests, want, "device healthy");
  EXPECT_EQ(m.cpu_route()->counts().cpu.runs, 0u);  // fallback alone sends nothing while the device serves

  device.Fail("GPU 0 met an unrecoverable error (simulated)");
  alone.Fail("GPU 0 met an unrecoverable error (simulated)");
  EXPECT_FALSE((*unrouted)->CheckServable().ok());  // without a route the model stops serving
  EXPECT_FALSE((*unrouted)->Infer(requests[0]).ok());
  EXPECT_TRUE(m.CheckServable().ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { ExpectScoresOf(m, requests, want, "fallen back, thread " + std::to_string(t)); });
  }
  for (std::thread& t : threads) t.join();
  const RouteCounts counts = m.cpu_route()->counts();
  EXPECT_EQ(counts.cpu.runs, counts.fallbacks);
  EXPECT_GT(counts.fallbacks, 0u);  // a merged batch is one run
  EXPECT_EQ(counts.cpu.rows, 4 * (1 + 2 + 4 + 5 + 40u));
}

TEST(Routing, MergedBatchesRouteAsOneRun) {
  const std::string dir = testing::SourcePath("models/zoo/din");
  testing::SwitchableHealthBackend device;
  auto model = LoadRouted(dir, "{cpu: rows, cpu_max_rows: 100000, cpu_runs: 2}", device, /*batching=*/1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Model& m = **model;
  const std::vector<InferRequest> requests = Requests(m);
  const auto want = ScoresOnTheCpu(dir, requests);
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] { ExpectScoresOf(m, requests, want, "batched, thread " + std::to_string(t)); });
  }
  for (std::thread& t : threads) t.join();
  const RouteCounts counts = m.cpu_route()->counts();
  EXPECT_EQ(counts.cpu.rows + counts.device.rows, 6 * (1 + 2 + 4 + 5 + 40u));  // every row ran once, somewhere
  EXPECT_GT(counts.cpu.runs, 0u);
  EXPECT_EQ(counts.fallbacks, 0u);
}

TEST(Routing, CostFitsBothSidesAtLoad) {
  const std::string dir = testing::SourcePath("models/zoo/dlrm");
  testing::SwitchableHealthBackend device;
  auto model = LoadRouted(dir, "{cpu: cost}", device, /*batching=*/0);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Model& m = **model;
  const RoutePolicy& policy = m.cpu_route()->policy();
  EXPECT_EQ(policy.mode, CpuRouting::kCost);
  EXPECT_GT(CostMicros(policy.device, 64, 64), 0);
  EXPECT_GT(CostMicros(policy.cpu, 64, 64), 0);
  const std::vector<InferRequest> requests = Requests(m);
  ExpectScoresOf(m, requests, ScoresOnTheCpu(dir, requests), "routed by cost");
  const RouteCounts counts = m.cpu_route()->counts();
  EXPECT_EQ(counts.cpu.runs + counts.device.runs, requests.size());
}

TEST(Routing, AModelOnTheCpuHasNoRoute) {
  const std::string dir = testing::SourcePath("models/zoo/din");
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok());
  config->routing.cpu = CpuRouting::kFallback;
  ModelOptions options;
  options.config = *config;
  auto model = Model::Load(dir, -1, options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->cpu_route(), nullptr);
}

TEST(Routing, AModelWithoutPlansOnItsDeviceServesOnTheCpuAlone) {
  const std::string dir = testing::SourcePath("models/zoo/din");
  testing::SwitchableHealthBackend device;
  device.FailPrepare("the model needs about 900 MB; 200 MB are free (simulated)");
  auto refused = LoadRouted(dir, "{cpu: off}", device, /*batching=*/-1);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted) << refused.status().ToString();
  auto model = LoadRouted(dir, "{cpu: fallback}", device, /*batching=*/-1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Model& m = **model;
  EXPECT_EQ(&m.backend(), &CpuBackend());
  EXPECT_EQ(m.cpu_route(), nullptr);  // the CPU is the model's device now
  ASSERT_EQ(m.replicas().size(), 1u);
  const std::vector<InferRequest> requests = Requests(m);
  ExpectScoresOf(m, requests, ScoresOnTheCpu(dir, requests), "on the CPU alone");
  EXPECT_TRUE(m.CheckServable().ok());
}

TEST(Routing, MetricsCountEachBackend) {
  namespace fs = std::filesystem;
  const fs::path repo = fs::temp_directory_path() / ("rankd_routing_" + std::to_string(::getpid()));
  fs::remove_all(repo);
  fs::create_directories(repo / "din");
  fs::copy(testing::SourcePath("models/zoo/din"), repo / "din", fs::copy_options::recursive);
  std::ofstream(repo / "din" / "config.yaml", std::ios::app) << "\nrouting: {cpu: rows, cpu_max_rows: 2}\n";
  testing::SwitchableHealthBackend device;
  RepositoryOptions options;
  options.root = repo.string();
  options.model_options.replicas = {&device};
  options.model_options.batching = 0;
  auto repository = ModelRepository::Create(options);
  ASSERT_TRUE(repository.ok()) << repository.status().ToString();
  EXPECT_NE(RouteMetricsText(**repository).find("rankd_route_runs{model=\"din\",version=\"1\",route=\"cpu\"} 0\n"),
            std::string::npos)
      << "the load's own runs are not counted";
  auto model = (*repository)->Get("din");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  for (int64_t rows : {1, 2, 7}) ASSERT_TRUE((*model)->Infer((*model)->ExampleRequest(rows, 2)).ok());
  const std::string text = RouteMetricsText(**repository);
  for (const char* line :
       {"rankd_route_runs{model=\"din\",version=\"1\",route=\"cpu\"} 2\n",
        "rankd_route_runs{model=\"din\",version=\"1\",route=\"device\"} 1\n",
        "rankd_route_rows{model=\"din\",version=\"1\",route=\"cpu\"} 3\n",
        "rankd_route_rows{model=\"din\",version=\"1\",route=\"device\"} 7\n",
        "rankd_route_fallbacks{model=\"din\",version=\"1\"} 0\n",
        "rankd_route_run_seconds_count{model=\"din\",version=\"1\",route=\"cpu\"} 2\n",
        "rankd_route_run_seconds_bucket{model=\"din\",version=\"1\",route=\"device\",le=\"+Inf\"} 1\n",
        "# TYPE rankd_route_run_seconds histogram\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  }
  fs::remove_all(repo);
}

TEST(Routing, OnTheGpuTheCpuScoresAsTheDevice) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  const std::string dir = testing::SourcePath("models/zoo/dlrm_dcnv2");
  auto model = LoadRouted(dir, "{cpu: rows, cpu_max_rows: 4}", *cuda, /*batching=*/0);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Model& m = **model;
  const std::vector<InferRequest> requests = Requests(m);
  ExpectScoresOf(m, requests, ScoresOnTheCpu(dir, requests), "routed by rows on a GPU");
  EXPECT_EQ(m.cpu_route()->counts().cpu.runs, 3u);
  EXPECT_EQ(m.cpu_route()->counts().device.runs, 2u);
}

}  // namespace
}  // namespace rankd
