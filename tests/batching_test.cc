// Batching inside a model (docs/batching.md): merging and splitting, the fitted cost model, the
// config section, and concurrent requests on a batched model scoring exactly as they do alone.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <optional>
#include <random>
#include <thread>

#include "batching/batch_merge.h"
#include "batching/cost_model.h"
#include "serving/model.h"
#include "test_util.h"

namespace rankd {
namespace {

using testing::MakeF32;
using testing::MakeI64;

TEST(BatchMerge, ConcatenatesRowsAndShiftsOffsets) {
  PreparedRequest a, b;
  a.inputs = {MakeF32({2, 2}, {1, 2, 3, 4}), MakeI64({3}, {7, 8, 9}), MakeI64({3}, {0, 1, 3})};
  a.ragged_max_lengths = {2};
  a.rows = 2;
  a.sequence_elements = 3;
  b.inputs = {MakeF32({1, 2}, {5, 6}), MakeI64({4}, {1, 2, 3, 4}), MakeI64({2}, {0, 4})};
  b.ragged_max_lengths = {4};
  b.rows = 1;
  b.sequence_elements = 4;
  PreparedRequest m = MergeRequests(
      {&a, &b}, {{GraphInputKind::kDense, -1}, {GraphInputKind::kValues, 0}, {GraphInputKind::kOffsets, 0}});
  EXPECT_EQ(m.rows, 3);
  EXPECT_EQ(m.sequence_elements, 7);
  EXPECT_EQ(m.ragged_max_lengths, std::vector<int64_t>{4});
  EXPECT_EQ(testing::RelativeError(m.inputs[0], MakeF32({3, 2}, {1, 2, 3, 4, 5, 6})), 0.0);
  EXPECT_EQ(testing::RelativeError(m.inputs[1], MakeI64({7}, {7, 8, 9, 1, 2, 3, 4})), 0.0);
  EXPECT_EQ(testing::RelativeError(m.inputs[2], MakeI64({4}, {0, 1, 3, 7})), 0.0);

  auto split = SplitRows({MakeF32({3, 1}, {0.1f, 0.2f, 0.3f})}, {2, 1}, {"score"});
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  EXPECT_EQ(testing::RelativeError((*split)[0][0], MakeF32({2, 1}, {0.1f, 0.2f})), 0.0);
  EXPECT_EQ(testing::RelativeError((*split)[1][0], MakeF32({1, 1}, {0.3f})), 0.0);
}

// A request's part of a batch's output views it (kept alive by the parts alone), unless the
// output views memory the batch does not own, which is copied.
TEST(BatchMerge, SplitPartsViewTheBatchsOutput) {
  const float* batch_data = nullptr;
  std::vector<std::vector<Tensor>> parts;
  {
    Tensor batch = MakeF32({5, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    batch_data = batch.data<float>();
    auto split = SplitRows({batch}, {1, 3, 1}, {"score"});
    ASSERT_TRUE(split.ok()) << split.status().ToString();
    parts = std::move(*split);
  }  // the batch's tensor is gone; its buffer lives on in the parts
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0][0].data<float>(), batch_data);
  EXPECT_EQ(parts[1][0].data<float>(), batch_data + 2);
  EXPECT_EQ(parts[2][0].data<float>(), batch_data + 8);
  EXPECT_EQ(testing::RelativeError(parts[1][0], MakeF32({3, 2}, {2, 3, 4, 5, 6, 7})), 0.0);
  EXPECT_EQ(testing::RelativeError(parts[2][0], MakeF32({1, 2}, {8, 9})), 0.0);

  std::vector<float> workspace = {1, 2, 3};
  auto copied = SplitRows({Tensor::View(DType::kF32, {3}, workspace.data())}, {2, 1}, {"score"});
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_TRUE((*copied)[0][0].owns());
  EXPECT_NE((*copied)[0][0].data<float>(), workspace.data());
  workspace.assign(3, 0.0f);
  EXPECT_EQ(testing::RelativeError((*copied)[1][0], MakeF32({1}, {3})), 0.0);
}

TEST(BatchMerge, OutputNotPerRowCannotBeSplit) {
  auto split = SplitRows({MakeF32({1}, {0.5f})}, {2, 1}, {"total"});
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.status().code(), StatusCode::kInternal);
  EXPECT_NE(split.status().message().find("'total'"), std::string::npos);
}

TEST(CostModel, RecoversLinearCostsAndFindsTheKnee) {
  // 2 µs per row, 0.5 per id, 30 per request: throughput keeps improving up to the largest size.
  std::vector<CostSample> rows_grow, lengths_grow;
  for (int64_t rows : {1, 4, 16, 64, 256}) rows_grow.push_back({rows, rows, 2.0 * rows + 0.5 * rows + 30});
  for (int64_t seq : {64, 512}) lengths_grow.push_back({16, seq, 2.0 * 16 + 0.5 * seq + 30});
  FittedCost fit = FitCost(rows_grow, lengths_grow);
  EXPECT_NEAR(fit.per_row, 2.0, 1e-6);
  EXPECT_NEAR(fit.per_sequence_element, 0.5, 1e-6);
  EXPECT_NEAR(fit.per_request, 30.0, 1e-6);
  EXPECT_NEAR(fit.budget, 300.0, 1e-6);  // the fixed 30 µs are a tenth of the batch's cost

  // No fixed cost: merging gains nothing, the budget is zero and every request runs alone.
  fit = FitCost({{1, 0, 2}, {16, 0, 32}, {64, 0, 128}});
  EXPECT_NEAR(fit.per_row, 2.0, 1e-9);
  EXPECT_EQ(fit.per_sequence_element, 0.0);  // no sequence samples: not determined, zero
  EXPECT_NEAR(fit.budget, 0.0, 1e-9);
}

TEST(CostModel, SequenceProbesSpreadTheLengthsAModelTakes) {
  auto lengths = [](const std::vector<LengthProbe>& probes) {
    std::vector<int64_t> out;
    for (const LengthProbe& p : probes) out.push_back(p.length);
    return out;
  };
  // W1: max lengths 1-100; as many rows as 65,536 ids of the longest allow, at most 256.
  std::vector<LengthProbe> w1 = SequenceProbes(4096, 100);
  EXPECT_EQ(lengths(w1), (std::vector<int64_t>{12, 50, 100}));
  for (const LengthProbe& p : w1) EXPECT_EQ(p.rows, 256);
  // W2: a user sequence of up to 1,000 ids.
  std::vector<LengthProbe> w2 = SequenceProbes(4096, 1000);
  EXPECT_EQ(lengths(w2), (std::vector<int64_t>{125, 500, 1000}));
  EXPECT_EQ(w2[0].rows, 65);
  EXPECT_EQ(SequenceProbes(4096, 65536)[0].rows, 16);  // never fewer than 16 rows...
  EXPECT_EQ(SequenceProbes(8, 100)[0].rows, 8);        // ...nor more than a batch may have
  EXPECT_TRUE(SequenceProbes(4096, 1).empty());        // no length beyond the row probes' 1
  EXPECT_EQ(lengths(SequenceProbes(4096, 2)), (std::vector<int64_t>{2}));
  EXPECT_EQ(lengths(SequenceProbes(4096, 9)), (std::vector<int64_t>{4, 9}));
}

TEST(CostModel, FitsW1sCostThroughTimingNoise) {
  // W1's 26 ragged inputs (the zoo's full max lengths); a run costs 0.09 µs a row, 0.0003 an id and
  // 100 a batch, each timing off by up to 4%. Served requests average 270 rows of about 120 ids: the
  // fitted cost of one must be near its true 40 µs whatever the noise, or merges follow the noise.
  const std::vector<int64_t> max_lengths = {3, 2, 1, 2, 6, 1, 1,  1,   1,  7,  3, 8, 1,
                                            6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1};
  auto ids_a_row = [&](int64_t length) {
    int64_t ids = 0;
    for (int64_t m : max_lengths) ids += std::min(length, m);
    return ids;
  };
  auto truth = [](double rows, double ids) { return 0.09 * rows + 0.0003 * ids + 100; };
  const double request = truth(270, 270 * 120) - 100;
  for (uint32_t seed = 1; seed <= 50; ++seed) {
    std::mt19937 noise(seed);
    std::uniform_real_distribution<double> off(-0.04, 0.04);
    std::vector<CostSample> rows_grow, lengths_grow;
    auto time = [&](int64_t rows, int64_t length) {
      const int64_t ids = rows * ids_a_row(length);
      (length == 1 ? rows_grow : lengths_grow)
          .push_back({rows, ids, truth(static_cast<double>(rows), static_cast<double>(ids)) * (1 + off(noise))});
    };
    for (int64_t rows = 1; rows <= 4096; rows *= 4) time(rows, 1);
    for (const LengthProbe& p : SequenceProbes(4096, 100)) time(p.rows, p.length);
    FittedCost fit = FitCost(rows_grow, lengths_grow);
    const double fitted = CostMicros(fit, 270, 270 * 120) - fit.per_request;
    EXPECT_NEAR(fitted / request, 1.0, 0.25) << "seed " << seed << ": " << fit.per_row << " a row, "
                                             << fit.per_sequence_element << " an id, " << fit.per_request;
  }
}

TEST(CostModel, KeepsTheFixedCostWhenAnIdCostsMoreWithMoreRows) {
  // W2 (DIN) on the CPU: attention over the user's sequence for every candidate, so an id costs
  // 0.022 µs a row; 5 µs a batch, 0.9 a row; two user inputs of up to 20 ids. One least squares over
  // every probe gave no fixed cost there (no budget: the model never merged).
  auto truth = [](double rows, double ids) { return 5 + 0.9 * rows + 0.022 * rows * ids; };
  std::vector<CostSample> rows_grow, lengths_grow;
  for (int64_t rows = 1; rows <= 65536; rows *= 4) rows_grow.push_back({rows, 2, truth(static_cast<double>(rows), 2)});
  for (const LengthProbe& p : SequenceProbes(65536, 20)) {
    lengths_grow.push_back(
        {p.rows, 2 * p.length, truth(static_cast<double>(p.rows), 2.0 * static_cast<double>(p.length))});
  }
  FittedCost fit = FitCost(rows_grow, lengths_grow);
  EXPECT_NEAR(fit.per_request, 5.0, 1.0);
  EXPECT_NEAR(fit.budget, 50.0, 10.0);
  EXPECT_NEAR(fit.per_sequence_element, 0.022 * 256, 0.1);  // an id at the probes' 256 rows
  EXPECT_NEAR(fit.per_row, 0.9, 0.1);
}

TEST(BatchingConfig, ParsesKnobsAndRefusesBadOnes) {
  auto c = ParseModelConfig(R"({"dynamic_batching": {"max_queue_delay_microseconds": 200, "max_batch_size": 512,
      "priority_levels": 3, "default_priority_level": 2, "cost_per_row": 1.5, "cost_budget": 100,
      "preferred_batch_size": [256, 64, 256], "max_queue_wait_microseconds": 20000}})",
                            false);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->batching.enabled);
  EXPECT_EQ(c->batching.max_queue_delay_microseconds, 200);
  EXPECT_EQ(c->batching.max_batch_size, 512);
  EXPECT_EQ(c->batching.priority_levels, 3);
  EXPECT_EQ(c->batching.cost_per_row, 1.5);
  EXPECT_EQ(c->batching.preferred_batch_size, std::vector<int64_t>({64, 256}));
  EXPECT_EQ(c->batching.max_queue_wait_microseconds, 20000);
  EXPECT_EQ(ParseModelConfig("batching: {}", true)->batching.max_queue_wait_microseconds,
            -1);                               // automatic once the queue stands
  EXPECT_LT(c->batching.cost_per_request, 0);  // measured at warm-up
  EXPECT_EQ(ParseModelConfig("batching: {}", true)->batching.max_queue_delay_microseconds, 500);
  // Without a section a model batches, with no queue delay (Triton's auto-completed default).
  EXPECT_TRUE(ParseModelConfig("{}", false)->batching.enabled);
  EXPECT_FALSE(ParseModelConfig("{}", false)->batching.configured);
  EXPECT_EQ(ParseModelConfig("{}", false)->batching.max_queue_delay_microseconds, 0);
  EXPECT_FALSE(ParseModelConfig("batching: {enabled: false}", true)->batching.enabled);
  for (const char* bad :
       {R"({"batching": {"max_queue_delay": 5}})", R"({"batching": {"max_batch_size": -1}})",
        R"({"batching": {"cost_per_row": "fast"}})", R"({"batching": {"cost_budget": 0}})",
        R"({"batching": {"priority_levels": 2, "default_priority_level": 3}})",
        R"({"batching": {"preferred_batch_size": [0]}})", R"({"batching": {"preferred_batch_size": 8}})",
        R"({"batching": []})", R"({"batching": {"max_queue_wait_microseconds": -5}})"}) {
    auto parsed = ParseModelConfig(bad, false);
    EXPECT_FALSE(parsed.ok()) << bad;
    if (!parsed.ok()) {
      EXPECT_NE(parsed.status().message().find("batching"), std::string::npos) << bad;
    }
  }
}

// DIN (user-scope profile and ragged history, per-candidate item features), with batching set
// by `batching` or off.
// DIN with `batching` as its config's section; "" turns batching off, "default" keeps the config's
// (which has no section).
StatusOr<std::unique_ptr<Model>> LoadDin(const std::string& batching, const Backend* backend = &CpuBackend()) {
  std::string dir = testing::SourcePath("models/zoo/din");
  RANKD_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));
  if (batching != "default") {
    const std::string section = batching.empty() ? R"({"enabled": false})" : batching;
    RANKD_ASSIGN_OR_RETURN(ModelConfig b, ParseModelConfig("{\"batching\": " + section + "}", false));
    config.batching = b.batching;
  }
  ModelOptions options;
  options.backend = backend;
  return Model::LoadFile(dir + "/1/model.onnx", std::move(config), options);
}

// A random DIN request: `rows` candidates, a history of `length` ids (all below 40, in range).
InferRequest RandomDinRequest(const Model& model, int64_t rows, int64_t length, std::mt19937_64& rng) {
  InferRequest r = model.ExampleRequest(rows, length);
  for (InferInput& in : r.inputs) {
    if (in.lengths.size() == 1) {  // a user sequence: the requested length, even 0
      in.data = Tensor::Zeros(DType::kI64, {length});
      in.lengths = {length};
    }
    for (int64_t i = 0; i < in.data.size(); ++i) in.data.data<int64_t>()[i] = static_cast<int64_t>(rng() % 40);
  }
  return r;
}

// Sends requests[t] from thread t, one after another; counts the answers that came from merged
// batches and those that were an execution of their own batch.
std::vector<std::vector<StatusOr<std::vector<InferOutput>>>> InferConcurrently(
    const Model& model, const std::vector<std::vector<InferRequest>>& requests, std::atomic<int>& merged,
    std::atomic<int>& executions) {
  std::vector<std::vector<StatusOr<std::vector<InferOutput>>>> got(requests.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < requests.size(); ++t) {
    threads.emplace_back([&, t] {
      for (const InferRequest& r : requests[t]) {
        InferStats stats;
        got[t].push_back(model.Infer(r, &stats));
        if (stats.batch_requests > 1) ++merged;
        if (stats.execution) ++executions;
      }
    });
  }
  for (auto& th : threads) th.join();
  return got;
}

TEST(BatchedModel, ConcurrentRequestsMergeAndScoreAsTheyDoAlone) {
  auto plain = LoadDin("");
  auto batched = LoadDin(R"({"max_queue_delay_microseconds": 5000, "executors": 1, "cost_per_row": 1,
                             "cost_per_sequence_element": 0, "cost_per_request": 0, "cost_budget": 100000})");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_TRUE(batched.ok()) << batched.status().ToString();
  ASSERT_NE((*batched)->batch_policy(), nullptr);
  EXPECT_EQ((*plain)->batch_policy(), nullptr);

  constexpr int kThreads = 8, kPerThread = 12;
  std::vector<std::vector<InferRequest>> requests(kThreads);
  std::mt19937_64 rng(7);
  for (auto& list : requests) {
    for (int i = 0; i < kPerThread; ++i) {
      list.push_back(
          RandomDinRequest(**plain, 1 + static_cast<int64_t>(rng() % 30), static_cast<int64_t>(rng() % 21), rng));
    }
  }
  std::atomic<int> merged{0}, executions{0};
  auto got = InferConcurrently(**batched, requests, merged, executions);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      auto want = (*plain)->Infer(requests[t][i]);
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      ASSERT_TRUE(got[t][i].ok()) << got[t][i].status().ToString();
      const Tensor& a = (*got[t][i])[0].data;
      const Tensor& b = (*want)[0].data;
      ASSERT_EQ(a.shape(), b.shape());
      for (int64_t e = 0; e < a.size(); ++e) {
        EXPECT_NEAR(a.data<float>()[e], b.data<float>()[e], 1e-6) << "thread " << t << " request " << i << " row " << e;
      }
    }
  }
  EXPECT_GT(merged.load(), 0);
  EXPECT_LT(executions.load(), kThreads * kPerThread);
}

// With captured graphs (a GPU), a batch merges only into a bucket that has a graph; a bucket
// wanted a second time is captured in the background (merge_gate.h). Every answer is still the
// unbatched one.
TEST(BatchedModel, OnTheGpuBatchesMergeOnceTheirBucketRecursAndIsCaptured) {
  const Backend* cuda = testing::CudaOrNull();
  if (!cuda) GTEST_SKIP() << "no CUDA device";
  auto plain = LoadDin("", cuda);
  auto batched = LoadDin(R"({"max_queue_delay_microseconds": 5000, "executors": 1, "cost_per_row": 1,
                             "cost_per_sequence_element": 0, "cost_per_request": 0, "cost_budget": 100000})",
                         cuda);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_TRUE(batched.ok()) << batched.status().ToString();
  const BucketCounters start = (*batched)->bucket_counters();
  std::mt19937_64 rng(11);
  std::atomic<int> merged{0}, executions{0};
  uint64_t deferred_after_first_round = 0;
  // Rounds of 8 threads x 6 requests of one shape (8 candidates, 12 ids of history), so batches of
  // the same number of users recur from round to round.
  for (int round = 0; round < 4; ++round) {
    constexpr int kThreads = 8, kPerThread = 6;
    std::vector<std::vector<InferRequest>> requests(kThreads);
    for (auto& list : requests) {
      for (int i = 0; i < kPerThread; ++i) list.push_back(RandomDinRequest(**plain, 8, 12, rng));
    }
    auto got = InferConcurrently(**batched, requests, merged, executions);
    (*batched)->WaitForCaptures();
    for (int t = 0; t < kThreads; ++t) {
      for (int i = 0; i < kPerThread; ++i) {
        auto want = (*plain)->Infer(requests[t][i]);
        ASSERT_TRUE(want.ok()) << want.status().ToString();
        ASSERT_TRUE(got[t][i].ok()) << got[t][i].status().ToString();
        testing::ExpectOutputsNear({(*got[t][i])[0].data}, {(*want)[0].data}, 1e-5,
                                   "round " + std::to_string(round) + " thread " + std::to_string(t));
      }
    }
    if (round == 0) deferred_after_first_round = (*batched)->bucket_counters().merges_deferred;
  }
  const BucketCounters end = (*batched)->bucket_counters();
  // At first no bucket of several users had a graph; a batch merges only into one that has, so
  // merged batches show that recurring buckets were captured.
  EXPECT_GT(deferred_after_first_round, start.merges_deferred);
  EXPECT_GT(merged.load(), 0);
  EXPECT_EQ(end.capture_failures, 0u);
}

TEST(BatchedModel, BadIdFailsOnlyItsRequest) {
  auto plain = LoadDin("");
  auto batched = LoadDin(R"({"max_queue_delay_microseconds": 20000, "executors": 1, "cost_per_row": 1,
                             "cost_per_sequence_element": 0, "cost_per_request": 0, "cost_budget": 100000})");
  ASSERT_TRUE(plain.ok() && batched.ok());
  std::mt19937_64 rng(11);
  std::vector<InferRequest> requests;
  for (int i = 0; i < 6; ++i) requests.push_back(RandomDinRequest(**plain, 4 + i, 5, rng));
  // Request 3 names an item far outside the table: found only when its batch runs.
  for (InferInput& in : requests[3].inputs) {
    if (in.name == "item") in.data.data<int64_t>()[1] = 1 << 30;
  }
  std::vector<StatusOr<std::vector<InferOutput>>> got(requests.size(), Internal("not run"));
  std::vector<std::thread> threads;
  for (size_t k = 0; k < requests.size(); ++k) {
    threads.emplace_back([&, k] { got[k] = (*batched)->Infer(requests[k]); });
  }
  for (auto& th : threads) th.join();
  for (size_t k = 0; k < requests.size(); ++k) {
    if (k == 3) {
      ASSERT_FALSE(got[k].ok());
      EXPECT_EQ(got[k].status().code(), StatusCode::kInvalidArgument) << got[k].status().ToString();
      continue;
    }
    ASSERT_TRUE(got[k].ok()) << k << ": " << got[k].status().ToString();
    auto want = (*plain)->Infer(requests[k]);
    ASSERT_TRUE(want.ok());
    EXPECT_LE(testing::RelativeError((*got[k])[0].data, (*want)[0].data), 1e-6) << k;
  }
}

TEST(BatchedModel, DeadlinesPrioritiesAndMeasuredCosts) {
  // No cost in the config: measured at warm-up.
  auto batched = LoadDin(R"({"priority_levels": 2, "preferred_batch_size": [16, 8]})");
  ASSERT_TRUE(batched.ok()) << batched.status().ToString();
  const BatchPolicyOptions* policy = (*batched)->batch_policy();
  ASSERT_NE(policy, nullptr);
  EXPECT_EQ(policy->preferred_rows, std::vector<int64_t>({8, 16}));
  EXPECT_GT(policy->cost_per_row + policy->cost_per_seq + policy->cost_per_request, 0.0);
  // The budget follows the fit's rule; whether it is above zero depends on the timings (a fit
  // with no fixed cost, as under ASan, rightly merges nothing), so that is not asserted here.
  EXPECT_DOUBLE_EQ(policy->cost_budget, 10.0 * policy->cost_per_request);

  std::mt19937_64 rng(3);
  InferRequest r = RandomDinRequest(**batched, 3, 4, rng);
  EXPECT_TRUE((*batched)->Infer(r).ok());
  r.priority = 1;
  EXPECT_TRUE((*batched)->Infer(r).ok());
  r.priority = 3;
  auto out = (*batched)->Infer(r);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  // A deadline of one microsecond has passed before the batcher's thread looks at the queue (a
  // request queued: InferAsync from a thread not offered to run it).
  auto late = std::make_shared<ParsedRequest>();
  late->request = r;
  late->request.priority = 0;
  late->request.timeout_us = 1;
  std::promise<Status> answered;
  (*batched)->InferAsync(late, [&answered](StatusOr<std::vector<InferOutput>> outputs, const InferStats&) {
    answered.set_value(outputs.status());
  });
  Status late_status = answered.get_future().get();
  EXPECT_EQ(late_status.code(), StatusCode::kDeadlineExceeded) << late_status.ToString();
}

TEST(BatchedModel, GraphThatMixesRowsRefusesToBatch) {
  std::string path = testing::WriteRowMixingModel("mixes_rows/model.onnx");  // each row depends on the others
  auto config = ParseModelConfig(R"({"inputs": [{"name": "x", "datatype": "FP32", "dims": [4]}],
                                     "batching": {"cost_per_row": 1, "cost_per_sequence_element": 0,
                                                  "cost_per_request": 0, "cost_budget": 100}})",
                                 false);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto model = Model::LoadFile(path, *config);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("changes when requests are merged"), std::string::npos)
      << model.status().ToString();
  config->batching.enabled = false;
  EXPECT_TRUE(Model::LoadFile(path, *config).ok());
  // Batching only by default (no section): served without it rather than refused.
  config->batching = BatchingConfig{};
  auto unbatched = Model::LoadFile(path, *config);
  ASSERT_TRUE(unbatched.ok()) << unbatched.status().ToString();
  EXPECT_EQ((*unbatched)->batch_policy(), nullptr);
  EXPECT_FALSE((*unbatched)->config().batching.enabled);
}

// With shape buckets, merged batches stay within the largest bucket (a batch past it would grow an
// executor's buffers and drop its captured graphs), unless the config sets max_batch_size.
TEST(BatchedModel, MergedBatchesStayWithinTheLargestBucket) {
  std::string dir = testing::SourcePath("models/zoo/din");
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  config->buckets.enabled = 1;
  config->buckets.allowed_batch_sizes = {16, 64};
  auto model = Model::LoadFile(dir + "/1/model.onnx", *config);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_NE((*model)->batch_policy(), nullptr);
  EXPECT_EQ((*model)->batch_policy()->max_batch_rows, 64);
  config->batching.max_batch_size = 200;
  auto configured = Model::LoadFile(dir + "/1/model.onnx", *config);
  ASSERT_TRUE(configured.ok()) << configured.status().ToString();
  EXPECT_EQ((*configured)->batch_policy()->max_batch_rows, 200);
}

// A model that does not batch, on one executor: a request's timeout bounds its wait for the
// executor (DeadlineExceeded, not run), as a batcher's queue bounds a batched request's; the same
// request finding the executor free runs.
TEST(UnbatchedModel, ARequestsTimeoutBoundsItsWaitForAnExecutor) {
  const std::string dir = testing::SourcePath("models/zoo/din");
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok());
  auto unbatched = ParseModelConfig(R"({"batching": {"enabled": false}})", false);
  ASSERT_TRUE(unbatched.ok());
  config->batching = unbatched->batching;
  ModelOptions options;
  options.backend = &CpuBackend();
  options.executors = 1;
  auto model = Model::LoadFile(dir + "/1/model.onnx", *config, options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_EQ((*model)->batch_policy(), nullptr);
  std::mt19937_64 rng(11);
  const InferRequest busy = RandomDinRequest(**model, 2000, 20, rng);
  InferRequest hurried = RandomDinRequest(**model, 2, 3, rng);
  hurried.timeout_us = 300;
  std::atomic<bool> stop{false};
  std::atomic<int> busy_failed{0};
  std::thread holder([&] {  // keeps the one executor busy
    while (!stop.load()) busy_failed += (*model)->Infer(busy).ok() ? 0 : 1;
  });
  int expired = 0, other = 0;
  for (int i = 0; i < 5000 && expired == 0; ++i) {
    auto out = (*model)->Infer(hurried);
    if (out.status().code() == StatusCode::kDeadlineExceeded) {
      ++expired;
    } else if (!out.ok()) {
      ++other;
      ADD_FAILURE() << out.status().ToString();
    }
  }
  stop = true;
  holder.join();
  EXPECT_GT(expired, 0) << "no request waited past its timeout for the executor another held";
  EXPECT_EQ(other, 0);
  EXPECT_EQ(busy_failed.load(), 0);
  auto alone = (*model)->Infer(hurried);  // the executor free: it runs within its timeout
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
}

// A config without a batching section batches, with no queue delay; a request that finds the
// model idle runs at once on the calling thread, so a deadline of one microsecond (a bound on
// the time queued) does not fail it.
TEST(BatchedModel, BatchesByDefaultAndAnIdleModelRunsTheRequestAtOnce) {
  auto model = LoadDin("default");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const BatchPolicyOptions* policy = (*model)->batch_policy();
  ASSERT_NE(policy, nullptr);
  EXPECT_EQ(policy->max_queue_delay.count(), 0);
  std::mt19937_64 rng(5);
  InferRequest r = RandomDinRequest(**model, 3, 4, rng);
  r.timeout_us = 1;
  InferStats stats;
  auto out = (*model)->Infer(r, &stats);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(stats.batch_requests, 1);
  auto plain = LoadDin("");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ((*plain)->batch_policy(), nullptr);
  auto want = (*plain)->Infer(r);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_EQ((*out)[0].data.shape(), (*want)[0].data.shape());
  for (int64_t i = 0; i < (*want)[0].data.size(); ++i) {
    EXPECT_NEAR((*out)[0].data.data<float>()[i], (*want)[0].data.data<float>()[i], 1e-6f);
  }
}

// InferAsync from one thread: requests queue without waiting, run merged on the batcher's thread
// and score as they do alone; one the model refuses is answered before InferAsync returns; and
// destroying the model with requests still queued answers them all first, with the model usable
// from their callbacks.
TEST(BatchedModel, AsyncRequestsFromOneThreadMergeAndAreAnsweredBeforeTheModelGoes) {
  auto plain = LoadDin("");
  auto batched = LoadDin(R"({"max_queue_delay_microseconds": 5000, "executors": 1, "cost_per_row": 1,
                             "cost_per_sequence_element": 0, "cost_per_request": 0, "cost_budget": 100000})");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_TRUE(batched.ok()) << batched.status().ToString();

  constexpr int kRequests = 48;
  std::mt19937_64 rng(11);
  struct Answer {
    std::optional<StatusOr<std::vector<InferOutput>>> outputs;
    InferStats stats;
    std::thread::id thread;
    std::string model;
  };
  std::vector<Answer> answers(kRequests);
  std::vector<std::shared_ptr<ParsedRequest>> requests;
  const Model* model = batched->get();
  for (int k = 0; k < kRequests; ++k) {
    auto r = std::make_shared<ParsedRequest>();
    r->request = RandomDinRequest(**plain, 1 + static_cast<int64_t>(rng() % 30), static_cast<int64_t>(rng() % 21), rng);
    requests.push_back(r);
    model->InferAsync(r, [&answers, k, model](StatusOr<std::vector<InferOutput>> outputs, const InferStats& stats) {
      answers[k] = {std::move(outputs), stats, std::this_thread::get_id(), model->name()};
    });
  }
  auto refused = std::make_shared<ParsedRequest>();
  refused->request = (*plain)->ExampleRequest(2);
  refused->request.outputs = {"nope"};
  bool refused_answered = false;
  model->InferAsync(refused, [&](StatusOr<std::vector<InferOutput>> outputs, const InferStats&) {
    refused_answered = true;
    EXPECT_EQ(outputs.status().code(), StatusCode::kInvalidArgument);
  });
  EXPECT_TRUE(refused_answered);
  batched->reset();  // drains: every queued request is answered before the model is gone

  int merged = 0;
  for (int k = 0; k < kRequests; ++k) {
    ASSERT_TRUE(answers[k].outputs.has_value()) << "request " << k << " was never answered";
    ASSERT_TRUE(answers[k].outputs->ok()) << answers[k].outputs->status().ToString();
    EXPECT_NE(answers[k].thread, std::this_thread::get_id());
    EXPECT_EQ(answers[k].model, "din");
    if (answers[k].stats.batch_requests > 1) ++merged;
    auto want = (*plain)->Infer(requests[k]->request);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    const Tensor& a = (**answers[k].outputs)[0].data;
    const Tensor& b = (*want)[0].data;
    ASSERT_EQ(a.shape(), b.shape());
    for (int64_t e = 0; e < a.size(); ++e) EXPECT_NEAR(a.data<float>()[e], b.data<float>()[e], 1e-6) << k;
  }
  // The executor takes the first requests alone as they come; how many before the queue builds
  // depends on the machine's timing: at least one batch merged.
  EXPECT_GE(merged, 2);
}

}  // namespace
}  // namespace rankd
