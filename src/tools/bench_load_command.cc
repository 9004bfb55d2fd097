// `rankd bench load`: MLPerf's server scenario without the network. Open-loop Poisson arrivals of a
// request mix (a file of KServe v2 bodies, drawn in rotation) are handed to the model in-process
// through Model::InferAsync, so requests queue in its batcher as a server's would; latency runs
// from each request's scheduled arrival to its answer (no coordinated omission). Per rate: offered
// and achieved rate, p50/p90/p99/p99.9, failures (a full queue, a passed deadline), requests per
// execution and the process's CPU time per request; with --p99-target-ms the highest rate whose
// p99 stays under it. Requests are parsed before the run (parsing is not timed here).
//
// Arrivals are handed over by `--clients` threads, each taking the next arrival and waiting for its
// time. With batching, a hand-over returns once the request is queued, so a few threads keep up;
// without it the request runs on the thread, so there must be as many threads as requests in flight.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/mutex.h"
#include "serving/model.h"
#include "tools/commands.h"
#include "tools/load_generator.h"
#include "tools/request_file.h"

namespace rankd {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct RateResult {
  LoadResult load;
  double requests_per_execution = 0;
  double cpu_ms_per_request = 0;
};

// Counts answers until every arrival of the run has one.
class Answers {
 public:
  explicit Answers(double measured_seconds) : recorder_(measured_seconds) {}
  void Record(double arrival_s, double now_s, const Status& status, const InferStats& stats) {
    MutexLock lock(mu_);
    if (status.ok()) {
      recorder_.Answer(arrival_s, now_s, 200, true);
      if (arrival_s >= 0 && stats.execution) ++executions_;
    } else {
      recorder_.Answer(arrival_s, now_s, static_cast<int>(status.code()), false);
    }
    if (++answered_ == expected_) done_.notify_all();
  }
  void Expect(int64_t n) {
    MutexLock lock(mu_);
    expected_ = n;
  }
  // False when `deadline` passed first.
  bool Wait(Clock::time_point deadline) {
    MutexLock lock(mu_);
    while (answered_ < expected_) {
      if (deadline == Clock::time_point::max()) {
        done_.wait(lock.native());
      } else if (done_.wait_until(lock.native(), deadline) == std::cv_status::timeout) {
        return answered_ >= expected_;
      }
    }
    return true;
  }
  LoadResult Summarise(double rate) {
    MutexLock lock(mu_);
    return recorder_.Summarise(rate);
  }
  int64_t executions() {
    MutexLock lock(mu_);
    return executions_;
  }

 private:
  Mutex mu_;
  std::condition_variable done_;
  LoadRecorder recorder_ RANKD_GUARDED_BY(mu_);
  int64_t answered_ RANKD_GUARDED_BY(mu_) = 0;
  int64_t expected_ RANKD_GUARDED_BY(mu_) = -1;
  int64_t executions_ RANKD_GUARDED_BY(mu_) = 0;
};

RateResult RunRate(const Model& model, const std::vector<std::shared_ptr<const ParsedRequest>>& requests,
                   const BenchLoadArgs& args, double rate) {
  LoadOptions schedule;
  schedule.rate = rate;
  schedule.seconds = args.seconds;
  schedule.warmup_seconds = args.warmup_seconds;
  schedule.seed = static_cast<uint64_t>(rate * 1000) + 1;
  Clock::time_point start = Clock::now() + std::chrono::milliseconds(50);
  const std::vector<Clock::time_point> arrivals = PoissonArrivals(schedule, start);
  const Clock::time_point measured =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(args.warmup_seconds));
  auto seconds_since = [&](Clock::time_point t) { return std::chrono::duration<double>(t - measured).count(); };
  Answers answers(args.seconds);
  answers.Expect(static_cast<int64_t>(arrivals.size()));
  std::atomic<size_t> next{0};
  double cpu_before = ProcessCpuSeconds();
  std::vector<std::thread> clients;
  for (int c = 0; c < args.clients; ++c) {
    clients.emplace_back([&] {
      for (size_t i = next++; i < arrivals.size(); i = next++) {
        std::this_thread::sleep_until(arrivals[i]);
        const double arrival_s = seconds_since(arrivals[i]);
        model.InferAsync(requests[i % requests.size()],
                         [&, arrival_s](StatusOr<std::vector<InferOutput>> outputs, const InferStats& stats) {
                           answers.Record(arrival_s, seconds_since(Clock::now()), outputs.status(), stats);
                         });
      }
    });
  }
  for (auto& t : clients) t.join();
  const bool all = answers.Wait(
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(args.timeout_seconds)));
  RateResult r;
  r.load = answers.Summarise(rate);
  if (!all) std::fprintf(stderr, "  warning: some requests were not answered within --timeout\n");
  const double cpu = ProcessCpuSeconds() - cpu_before;
  r.requests_per_execution =
      static_cast<double>(r.load.ok) / static_cast<double>(std::max<int64_t>(1, answers.executions()));
  r.cpu_ms_per_request = 1000 * cpu / static_cast<double>(std::max<size_t>(1, arrivals.size()));
  if (!all) answers.Wait(Clock::time_point::max());  // the callbacks refer to this frame
  return r;
}

}  // namespace

int BenchLoadCommand(const BenchLoadArgs& args) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "rankd bench load: %s\n", s.ToString().c_str());
    return 2;
  };
  auto backend = OpenBackend(args.device);
  if (!backend.ok()) return fail(backend.status());
  ModelOptions options;
  options.backend = *backend;
  options.gpus = GpusFlag(args.device);
  options.precision = args.precision;
  options.executors = args.executors;
  options.batching = args.batching == "on" ? 1 : args.batching == "off" ? 0 : -1;
  auto model = Model::Load((std::filesystem::path(args.model_repo) / args.model).string(), args.version, options);
  if (!model.ok()) return fail(model.status());
  auto lines = ReadRequestFile(args.requests);
  if (!lines.ok()) return fail(lines.status());
  std::vector<std::shared_ptr<const ParsedRequest>> requests;
  for (RequestLine& l : *lines) {
    auto r = std::make_shared<ParsedRequest>();
    r->request = std::move(l.request);
    r->length_sums = std::move(l.length_sums);
    // Each request once, untimed: its plan is built and its bucket captured before the run.
    auto first = (*model)->Infer(r->request, r->length_sums);
    if (!first.ok()) return fail(first.status().WithContext("request " + std::to_string(requests.size())));
    requests.push_back(std::move(r));
  }
  (*model)->WaitForCaptures();

  json out = {{"command", args.command_line},
              {"model", args.model},
              {"requests", args.requests},
              {"bodies", requests.size()},
              {"backend", (*model)->backend().name()},
              {"batching", (*model)->batch_policy() != nullptr},
              {"clients", args.clients},
              {"seconds", args.seconds}};
  // The batch costs this process fitted at warm-up (or its config set): runs of one model in
  // separate processes can merge differently when their fits differ.
  if (const BatchPolicyOptions* p = (*model)->batch_policy()) {
    out["batch_cost"] = {{"cost_per_row", p->cost_per_row},
                         {"cost_per_sequence_element", p->cost_per_seq},
                         {"cost_per_request", p->cost_per_request},
                         {"cost_budget", p->cost_budget},
                         {"max_batch_rows", p->max_batch_rows}};
    std::fprintf(stderr,
                 "batch cost: %.3g a row, %.3g a sequence element, %.3g a batch; budget %.3g, %lld rows at most\n",
                 p->cost_per_row, p->cost_per_seq, p->cost_per_request, p->cost_budget,
                 static_cast<long long>(p->max_batch_rows));
  }
  json results = json::array();
  double best_rate = 0;
  for (size_t k = 0; k < args.rates.size(); ++k) {
    const double rate = args.rates[k];
    std::fprintf(stderr, "[%zu/%zu] %.1f requests/s for %.0f s (+%.0f s warm-up) ...\n", k + 1, args.rates.size(), rate,
                 args.seconds, args.warmup_seconds);
    RateResult r = RunRate(**model, requests, args, rate);
    const LoadResult& l = r.load;
    std::fprintf(stderr,
                 "rate %8.1f/s: achieved %8.1f/s  p50 %7.3f  p90 %7.3f  p99 %7.3f  p99.9 %7.3f ms  failed %lld  "
                 "requests/execution %.2f  CPU %.3f ms/request\n",
                 rate, l.achieved_rate, l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms, static_cast<long long>(l.errors),
                 r.requests_per_execution, r.cpu_ms_per_request);
    if (l.spread > 0.25) {
      std::fprintf(stderr, "  warning: the median latency of this rate's quarters differs by %.0f%%: not steady\n",
                   100 * l.spread);
    }
    const bool within = l.errors == 0 && l.timeouts == 0 && l.achieved_rate >= 0.95 * rate &&
                        (args.p99_target_ms <= 0 || l.p99_ms <= args.p99_target_ms);
    if (within) best_rate = std::max(best_rate, rate);
    json result = LoadResultJson(l);
    result["requests_per_execution"] = r.requests_per_execution;
    result["cpu_ms_per_request"] = r.cpu_ms_per_request;
    results.push_back(std::move(result));
  }
  out["results"] = results;
  if (args.p99_target_ms > 0) {
    out["p99_target_ms"] = args.p99_target_ms;
    out["highest_rate_within_target"] = best_rate;
    std::fprintf(stderr, "highest rate with p99 under %.3f ms, no failures, at least 95%% achieved: %.1f/s\n",
                 args.p99_target_ms, best_rate);
  }
  const std::string text = out.dump(2);
  if (args.json_path.empty()) {
    std::printf("%s\n", text.c_str());
  } else {
    std::ofstream(args.json_path) << text << "\n";
  }
  return 0;
}

}  // namespace rankd
