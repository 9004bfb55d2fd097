#include "batching/batch_policy.h"

#include <algorithm>

namespace rankd {

double RequestCost(const QueuedRequest& r, const BatchPolicyOptions& o) {
  return o.cost_per_row * static_cast<double>(r.rows) + o.cost_per_seq * static_cast<double>(r.seq_elements);
}

BatchDecision DecideBatch(const std::vector<QueuedRequest>& queue, BatchClock::time_point now, int free_executors,
                          int busy_executors, const BatchPolicyOptions& o) {
  BatchDecision d;
  size_t live = 0;
  for (size_t i = 0; i < queue.size(); ++i) {
    if (queue[i].deadline <= now)
      d.expired.push_back(i);
    else
      ++live;
  }
  if (live == 0) return d;  // kIdle
  if (free_executors <= 0) {
    d.kind = BatchDecision::Kind::kWaitForExecutor;
    return d;
  }
  // Fill a batch in queue order, the live requests only (no list of them: this runs several times
  // a request). Its oldest request, and the longest prefix whose rows are a preferred size.
  double cost = o.cost_per_request;
  int64_t rows = 0;
  size_t count = 0, preferred = 0;
  BatchClock::time_point oldest = BatchClock::time_point::max();
  for (const QueuedRequest& r : queue) {
    if (r.deadline <= now) continue;
    double c = RequestCost(r, o);
    if (count > 0 && (cost + c > o.cost_budget || rows + r.rows > o.max_batch_rows)) break;
    cost += c;
    rows += r.rows;
    ++count;
    oldest = std::min(oldest, r.enqueued);
    if (std::binary_search(o.preferred_rows.begin(), o.preferred_rows.end(), rows)) preferred = count;
  }
  bool full = count < live || cost >= o.cost_budget || rows >= o.max_batch_rows;
  bool waited_enough = now - oldest >= o.max_queue_delay;
  if (full || waited_enough || busy_executors == 0) {
    d.kind = BatchDecision::Kind::kDispatch;
    d.count = count;
    return d;
  }
  // A prefix whose rows are a preferred size goes now; the rest keeps waiting for company.
  if (preferred > 0) {
    d.kind = BatchDecision::Kind::kDispatch;
    d.count = preferred;
    return d;
  }
  d.kind = BatchDecision::Kind::kWaitUntil;
  d.count = count;  // the batch that is forming
  d.wake = oldest + o.max_queue_delay;
  return d;
}

}  // namespace rankd
