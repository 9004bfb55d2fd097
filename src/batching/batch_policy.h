// BatchPolicy: the pure decision of the TensorBatch batcher (issue 4), with no threads and no
// clock of its own, so every rule is unit-tested with a fake clock.
//
// Given the queue (ordered by priority, then arrival), the time and how many executors are free,
// it says which queued requests to drop (deadline passed), and then either "dispatch the first k",
// or "wait until t", or "wait for an executor". Rules:
//   - a batch takes requests in queue order while the batch's cost stays within the budget and its
//     rows within the row cap; a single request over either runs alone;
//   - with an executor free, a batch is dispatched when it is full (the next request does not
//     fit), when the oldest request has waited max_queue_delay, or when no batch is running at all
//     (under light load nobody waits for company that is not coming);
//   - with preferred batch sizes (Triton's preferred_batch_size, in rows), the longest prefix of the
//     forming batch whose rows are exactly a preferred size is dispatched at once;
//   - otherwise the answer is "wait until" the oldest request's delay runs out.
// A batch's cost = cost_per_row * its rows + cost_per_seq * its sequence elements + cost_per_request,
// the last once: it is an execution's fixed cost (launches, copies, the wait), which merged requests
// share. Counted per request, it capped every batch below budget / cost_per_request requests (W2 at
// 9 whatever its sizes).
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace rankd {

using BatchClock = std::chrono::steady_clock;

// What the policy knows about one queued request.
struct QueuedRequest {
  int64_t rows = 0;          // candidate rows
  int64_t seq_elements = 0;  // sum of user-sequence lengths
  int priority = 0;          // higher runs first; equal priorities run in arrival order
  BatchClock::time_point enqueued;
  BatchClock::time_point deadline = BatchClock::time_point::max();
};

struct BatchPolicyOptions {
  double cost_per_row = 1.0;
  double cost_per_seq = 0.0;
  double cost_per_request = 0.0;
  double cost_budget = 4096.0;                     // a batch's cost stops growing past this
  int64_t max_batch_rows = 65536;                  // Triton's max_batch_size, in rows
  std::chrono::microseconds max_queue_delay{500};  // Triton's max_queue_delay_microseconds
  size_t max_enqueued = 1024;                      // past this, new requests are refused (UNAVAILABLE)
  // While the request at the head of the queue has waited longer than this, new requests are
  // refused (UNAVAILABLE): past its capacity a model answers some requests quickly and refuses the
  // rest at once, instead of making every request wait as long as the queue is. 0: no bound.
  std::chrono::microseconds max_queue_wait{0};
  // Without max_queue_wait: the same refusal, but only once the queue has stood (not emptied) for
  // kStandingQueueBatches of its latest batch's run time, at least kStandingQueueFloor, and against a
  // bound of kAutoQueueWaitRuns times a request's typical run time, at least kAutoQueueWaitFloor
  // (the Batcher measures both as batches run; no bound before the first). A burst queues and
  // drains as its batches take it; load past capacity leaves a queue no batch empties, and that is
  // shed (the controlled delay of CoDel and of "Fail at Scale", ACM Queue 2015). Within
  // kStandingQueueMemory of a refusal a queue need not stand first: shedding empties the queue,
  // and the same overload would otherwise fill it again unbounded for the interval (as CoDel
  // re-enters its dropping state). false: no bound.
  bool auto_queue_wait = false;
  std::vector<int64_t> preferred_rows;  // Triton's preferred_batch_size, in rows; ascending
};

inline constexpr int kAutoQueueWaitRuns = 4;
inline constexpr std::chrono::microseconds kAutoQueueWaitFloor{20'000};
inline constexpr int kStandingQueueBatches = 2;
inline constexpr std::chrono::microseconds kStandingQueueFloor{100'000};
inline constexpr std::chrono::microseconds kStandingQueueMemory{1'000'000};

struct BatchDecision {
  enum class Kind { kIdle, kDispatch, kWaitUntil, kWaitForExecutor };
  Kind kind = Kind::kIdle;
  size_t count = 0;             // kDispatch: the first `count` live requests; kWaitUntil: the batch forming
  BatchClock::time_point wake;  // kWaitUntil
  std::vector<size_t> expired;  // queue indices to answer DEADLINE_EXCEEDED, ascending
};

// What `r` adds to a batch's cost (its rows and sequence elements).
double RequestCost(const QueuedRequest& r, const BatchPolicyOptions& options);

// REQUIRES: `queue` is in priority-then-arrival order.
BatchDecision DecideBatch(const std::vector<QueuedRequest>& queue, BatchClock::time_point now, int free_executors,
                          int busy_executors, const BatchPolicyOptions& options);

}  // namespace rankd
