#include "batching/merge_gate.h"

namespace rankd {

MergeGate::Verdict MergeGate::Decide(uint64_t plan_id) {
  MutexLock lock(mu_);
  if (captured_.count(plan_id) > 0) return Verdict::kMerge;
  return ++wanted_[plan_id] == 2 ? Verdict::kSplitAndCapture : Verdict::kSplit;
}

void MergeGate::Captured(uint64_t plan_id) {
  MutexLock lock(mu_);
  captured_.insert(plan_id);
  wanted_.erase(plan_id);
}

}  // namespace rankd
