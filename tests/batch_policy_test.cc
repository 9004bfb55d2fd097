// The batcher's pure decision function under a fake clock.
#include "batching/batch_policy.h"

#include <gtest/gtest.h>

namespace rankd {
namespace {

using std::chrono::microseconds;
using Kind = BatchDecision::Kind;

const BatchClock::time_point T0 = BatchClock::time_point() + std::chrono::hours(1);

QueuedRequest Req(int64_t rows, int64_t at_us, int64_t seq = 0) {
  QueuedRequest r;
  r.rows = rows;
  r.seq_elements = seq;
  r.enqueued = T0 + microseconds(at_us);
  return r;
}

BatchPolicyOptions Options() {
  BatchPolicyOptions o;
  o.cost_budget = 1000;
  o.max_batch_rows = 800;
  o.max_queue_delay = microseconds(500);
  return o;
}

TEST(BatchPolicy, EmptyQueueIsIdle) { EXPECT_EQ(DecideBatch({}, T0, 1, 0, Options()).kind, Kind::kIdle); }

TEST(BatchPolicy, LightLoadDispatchesAtOnce) {
  // Nothing running: one small request goes now, no waiting for company.
  BatchDecision d = DecideBatch({Req(200, 0)}, T0, 2, 0, Options());
  EXPECT_EQ(d.kind, Kind::kDispatch);
  EXPECT_EQ(d.count, 1u);
}

TEST(BatchPolicy, WhileBusyWaitsForDelayOrBudget) {
  auto o = Options();
  std::vector<QueuedRequest> q = {Req(200, 0), Req(200, 100)};
  BatchDecision d = DecideBatch(q, T0 + microseconds(200), 1, 1, o);
  EXPECT_EQ(d.kind, Kind::kWaitUntil);
  EXPECT_EQ(d.wake, T0 + microseconds(500));  // the oldest request's delay
  d = DecideBatch(q, T0 + microseconds(500), 1, 1, o);
  EXPECT_EQ(d.kind, Kind::kDispatch);
  EXPECT_EQ(d.count, 2u);
}

TEST(BatchPolicy, BudgetClosesTheBatch) {
  auto o = Options();
  std::vector<QueuedRequest> q = {Req(300, 0), Req(300, 10), Req(300, 20), Req(300, 30)};
  BatchDecision d = DecideBatch(q, T0 + microseconds(40), 1, 1, o);  // busy, but full: dispatch
  EXPECT_EQ(d.kind, Kind::kDispatch);
  EXPECT_EQ(d.count, 2u);  // 600 rows fit the 800-row cap; the third would not
  o.max_batch_rows = 100000;
  d = DecideBatch(q, T0 + microseconds(40), 1, 1, o);
  EXPECT_EQ(d.count, 3u);  // cost 900 <= 1000; a fourth would be 1200
}

TEST(BatchPolicy, AnExecutionsFixedCostCountsOncePerBatch) {
  auto o = Options();
  o.max_batch_rows = 100000;
  o.cost_per_row = 1;
  o.cost_per_request = 100;  // the fitted rule's budget: ten times it
  std::vector<QueuedRequest> q(30, Req(30, 0));
  BatchDecision d = DecideBatch(q, T0 + microseconds(10), 1, 1, o);
  EXPECT_EQ(d.kind, Kind::kDispatch);
  EXPECT_EQ(d.count, 30u);  // 100 + 30 * 30 = 1000: thirty small requests share one execution
  q.push_back(Req(1, 0));
  EXPECT_EQ(DecideBatch(q, T0 + microseconds(10), 1, 1, o).count, 30u);  // a 31st passes the budget
  o.cost_per_request = 1000;
  d = DecideBatch({Req(500, 0), Req(1, 0)}, T0 + microseconds(10), 1, 1, o);
  EXPECT_EQ(d.count, 1u);  // a request whose execution alone fills the budget runs alone
}

TEST(BatchPolicy, PreferredSizeGoesAtOnceAndTheRestWaits) {
  auto o = Options();
  std::vector<QueuedRequest> q = {Req(100, 0), Req(60, 10), Req(40, 20), Req(50, 30)};
  auto now = T0 + microseconds(100);  // busy, not full, nobody has waited 500 us
  EXPECT_EQ(DecideBatch(q, now, 1, 1, o).kind, Kind::kWaitUntil);
  o.preferred_rows = {160, 200, 512};
  BatchDecision d = DecideBatch(q, now, 1, 1, o);
  EXPECT_EQ(d.kind, Kind::kDispatch);
  EXPECT_EQ(d.count, 3u);         // the longest prefix of a preferred size: 100 + 60 + 40 rows
  o.preferred_rows = {150, 250};  // prefixes of 100, 160, 200, 250 rows: only the whole queue is
  d = DecideBatch(q, now, 1, 1, o);
  EXPECT_EQ(d.kind, Kind::kDispatch);
  EXPECT_EQ(d.count, 4u);
  o.preferred_rows = {150, 300};
  d = DecideBatch(q, now, 1, 1, o);
  EXPECT_EQ(d.kind, Kind::kWaitUntil);  // none is: wait for the delay as without preferred sizes
  EXPECT_EQ(d.wake, T0 + microseconds(500));
  EXPECT_EQ(DecideBatch(q, now, 0, 2, o).kind, Kind::kWaitForExecutor);  // still needs an executor
}

TEST(BatchPolicy, SequenceCostCounts) {
  auto o = Options();
  o.cost_per_seq = 0.5;
  std::vector<QueuedRequest> q = {Req(100, 0, 1000), Req(100, 10, 1000)};  // 600 each
  BatchDecision d = DecideBatch(q, T0 + microseconds(20), 1, 1, o);
  EXPECT_EQ(d.kind, Kind::kDispatch);
  EXPECT_EQ(d.count, 1u);
}

TEST(BatchPolicy, OversizedRequestRunsAlone) {
  std::vector<QueuedRequest> q = {Req(5000, 0), Req(10, 10)};
  BatchDecision d = DecideBatch(q, T0 + microseconds(20), 1, 1, Options());
  EXPECT_EQ(d.kind, Kind::kDispatch);
  EXPECT_EQ(d.count, 1u);
}

TEST(BatchPolicy, NoFreeExecutorWaits) {
  BatchDecision d = DecideBatch({Req(10, 0)}, T0 + microseconds(10000), 0, 2, Options());
  EXPECT_EQ(d.kind, Kind::kWaitForExecutor);
}

TEST(BatchPolicy, ExpiredRequestsAreDroppedFirst) {
  std::vector<QueuedRequest> q = {Req(10, 0), Req(10, 5), Req(10, 6)};
  q[0].deadline = T0 + microseconds(50);
  q[2].deadline = T0 + microseconds(60);
  BatchDecision d = DecideBatch(q, T0 + microseconds(100), 1, 0, Options());
  EXPECT_EQ(d.expired, std::vector<size_t>({0, 2}));
  EXPECT_EQ(d.kind, Kind::kDispatch);
  EXPECT_EQ(d.count, 1u);  // only the live request
  d = DecideBatch({q[0]}, T0 + microseconds(100), 1, 0, Options());
  EXPECT_EQ(d.kind, Kind::kIdle);
  EXPECT_EQ(d.expired, std::vector<size_t>({0}));
}

}  // namespace
}  // namespace rankd
