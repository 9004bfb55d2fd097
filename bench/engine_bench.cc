// rankd_engine_bench: in-process latency of Model::Infer on a file of KServe v2 requests.
//
// Parses every request first (parsing is not timed), warms up, then scores the requests in
// rotation and prints one JSON line: median, p99 and mean latency in ms, and pairs/s (candidate
// rows per second at the median). Refuses request sets whose inputs are all zero; warns when the
// medians of the run's quarters differ by more than 25% ("spread" in the JSON).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "frontend/kserve_json.h"
#include "runtime/op_profile.h"
#include "serving/model.h"

int main(int argc, char** argv) {
  using namespace rankd;
  CLI::App app{"In-process engine benchmark"};
  std::string repo, name, requests_path, label, backend_name = "cpu";
  int warmup = 10, iters = 200;
  app.add_option("--model-repo", repo)->required();
  app.add_option("--model", name)->required();
  app.add_option("--requests", requests_path, "KServe v2 bodies, one per line, all of one size")->required();
  app.add_option("--warmup", warmup);
  app.add_option("--iters", iters);
  app.add_option("--label", label);
  app.add_option("--backend", backend_name, "cpu | cuda | auto");
  std::string precision, buckets = "config";
  app.add_option("--precision", precision, "fp32 | tf32 | bf16 (default: the model config's)");
  app.add_option("--buckets", buckets, "on | off | config: shape buckets (and, on a GPU, captured graphs)")
      ->check(CLI::IsMember({"on", "off", "config"}));
  CLI11_PARSE(app, argc, argv);

  auto backend = FindBackend(backend_name);
  if (!backend.ok()) {
    std::fprintf(stderr, "%s\n", backend.status().ToString().c_str());
    return 2;
  }
  ModelOptions options;
  options.backend = *backend;
  options.precision = precision;
  options.shape_buckets = buckets == "on" ? 1 : buckets == "off" ? 0 : -1;
  auto model = Model::Load((std::filesystem::path(repo) / name).string(), -1, options);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 2;
  }
  std::vector<InferRequest> requests;
  std::ifstream in(requests_path);
  std::string line;
  bool any_nonzero = false;
  while (std::getline(in, line)) {
    auto r = ParseInferRequestJson(line, JsonLimits{size_t{1} << 30, int64_t{1} << 30, 8});
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 2;
    }
    for (const InferInput& x : r->inputs) {
      for (int64_t i = 0; i < x.data.size() && !any_nonzero; ++i) any_nonzero = x.data.ScalarAsDouble(i) != 0;
    }
    requests.push_back(std::move(*r));
  }
  if (requests.empty() || !any_nonzero) {
    std::fprintf(stderr, "refusing to time an empty or all-zero request set\n");
    return 2;
  }
  int64_t rows = 0;
  auto first = (*model)->Infer(requests[0]);
  if (!first.ok()) {
    std::fprintf(stderr, "%s\n", first.status().ToString().c_str());
    return 2;
  }
  rows = first->front().data.dim(0);
  // Warm-up covers every request at least once, so each shape's plan is built before timing.
  warmup = std::max<int>(warmup, static_cast<int>(requests.size()));
  for (int i = 0; i < warmup; ++i) (void)(*model)->Infer(requests[static_cast<size_t>(i) % requests.size()]);
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    const InferRequest& r = requests[static_cast<size_t>(i) % requests.size()];
    auto t0 = std::chrono::steady_clock::now();
    auto out = (*model)->Infer(r);
    auto t1 = std::chrono::steady_clock::now();
    if (!out.ok()) {
      std::fprintf(stderr, "%s\n", out.status().ToString().c_str());
      return 1;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  // Sanity: the medians of the run's four quarters should agree; a large spread means the
  // machine was busy or clocks moved, and the numbers should not be trusted.
  double spread = 0;
  if (ms.size() >= 8) {
    std::vector<double> medians;
    size_t quarter = ms.size() / 4;
    for (size_t q = 0; q < 4; ++q) {
      std::vector<double> part(ms.begin() + static_cast<std::ptrdiff_t>(q * quarter),
                               ms.begin() + static_cast<std::ptrdiff_t>((q + 1) * quarter));
      std::sort(part.begin(), part.end());
      medians.push_back(part[part.size() / 2]);
    }
    auto [lo, hi] = std::minmax_element(medians.begin(), medians.end());
    spread = *hi / *lo - 1;
    if (spread > 0.25) {
      std::fprintf(stderr, "warning: the medians of the run's four quarters differ by %.0f%% (%.4f to %.4f ms); rerun\n",
                   spread * 100, *lo, *hi);
    }
  }
  std::sort(ms.begin(), ms.end());
  double median = ms[ms.size() / 2], p99 = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  double mean = 0;
  for (double v : ms) mean += v;
  mean /= static_cast<double>(ms.size());
  auto plan = (*model)->PlanForRequest(requests[0]);
  long long steps = plan.ok() ? static_cast<long long>((*plan)->steps().size()) : -1;
  BucketCounters c = (*model)->bucket_counters();
  std::printf("{\"label\":\"%s\",\"backend\":\"%s\",\"buckets\":\"%s\",\"graph_hits\":%llu,\"graph_misses\":%llu,\"steps\":%lld,\"rows\":%lld,\"median_ms\":%.4f,\"p99_ms\":%.4f,\"mean_ms\":%.4f,\"pairs_per_s\":%.1f,\"spread\":%.3f,\"iters\":%d}\n",
              label.c_str(), (*backend)->name(), (*model)->load_report().buckets.c_str(),
              static_cast<unsigned long long>(c.graph_hits), static_cast<unsigned long long>(c.graph_misses), steps, static_cast<long long>(rows), median, p99, mean, static_cast<double>(rows) / (median / 1000.0), spread, iters);
  if (OpProfile::enabled()) std::fprintf(stderr, "%s", OpProfile::Report().c_str());
  return 0;
}
