// MergeGate: whether a batch of several requests runs merged or as its requests one after
// another, where requests replay captured graphs (docs/batching.md, "Merges and captured graphs").
//
// Warm-up captures buckets of one user. A merged batch lands in a bucket of several users; run
// kernel by kernel, it costs a GPU more than its requests replaying their own graphs, so merging
// it would lower throughput. Until its bucket has a graph such a batch runs as its requests; the
// second time a bucket is wanted (it recurs) it is captured in the background, and once it has a
// graph its batches merge. A bucket seen once is never captured. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "common/mutex.h"

namespace rankd {

class MergeGate {
 public:
  enum class Verdict {
    kMerge,            // the batch's plan has a graph: run it merged
    kSplit,            // run its requests alone
    kSplitAndCapture,  // run its requests alone, and capture the plan in the background
  };

  // A batch whose merged plan is `plan_id`.
  Verdict Decide(uint64_t plan_id);
  // `plan_id` has a graph (on some executor): its batches merge from now on.
  void Captured(uint64_t plan_id);

 private:
  Mutex mu_;
  std::unordered_set<uint64_t> captured_ RANKD_GUARDED_BY(mu_);
  std::unordered_map<uint64_t, int> wanted_ RANKD_GUARDED_BY(mu_);  // batches refused per plan
};

}  // namespace rankd
