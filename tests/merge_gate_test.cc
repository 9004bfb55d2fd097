// MergeGate: a batch merges only once its plan has a graph; its plan is captured the second time
// it is wanted, once, however many threads ask at the same moment. Runs under ThreadSanitizer with
// the batcher (scripts/test.sh).
#include "batching/merge_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace rankd {
namespace {

using Verdict = MergeGate::Verdict;

TEST(MergeGate, SplitsUntilItsPlanRecursThenCapturesOnceThenMerges) {
  MergeGate gate;
  EXPECT_EQ(gate.Decide(7), Verdict::kSplit);            // seen once: never captured for that
  EXPECT_EQ(gate.Decide(7), Verdict::kSplitAndCapture);  // it recurs: captured in the background
  EXPECT_EQ(gate.Decide(7), Verdict::kSplit);            // still no graph: not captured again
  EXPECT_EQ(gate.Decide(8), Verdict::kSplit);            // another plan counts on its own
  gate.Captured(7);
  EXPECT_EQ(gate.Decide(7), Verdict::kMerge);
  EXPECT_EQ(gate.Decide(7), Verdict::kMerge);
  EXPECT_EQ(gate.Decide(8), Verdict::kSplitAndCapture);
}

TEST(MergeGate, PlanCapturedBeforeItIsWantedMergesAtOnce) {
  MergeGate gate;
  gate.Captured(3);  // say, a bucket some earlier batch had captured
  EXPECT_EQ(gate.Decide(3), Verdict::kMerge);
}

TEST(MergeGate, ConcurrentBatchesAskForOneCapturePerPlan) {
  MergeGate gate;
  constexpr int kThreads = 8, kPlans = 50;
  std::atomic<int> captures[kPlans] = {};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int p = 0; p < kPlans; ++p) {
        if (gate.Decide(static_cast<uint64_t>(p)) == Verdict::kSplitAndCapture) ++captures[p];
        if (p % 2 == 0) gate.Captured(static_cast<uint64_t>(p));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int p = 0; p < kPlans; ++p) {
    // Odd plans never get a graph: wanted 8 times, captured once. Even ones are marked captured
    // after each thread's first ask, so at most one capture is asked for.
    if (p % 2 == 1)
      EXPECT_EQ(captures[p].load(), 1) << "plan " << p;
    else
      EXPECT_LE(captures[p].load(), 1) << "plan " << p;
    EXPECT_EQ(gate.Decide(static_cast<uint64_t>(p)), p % 2 == 0 ? Verdict::kMerge : Verdict::kSplit);
  }
}

}  // namespace
}  // namespace rankd
