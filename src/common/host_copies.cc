#include "common/host_copies.h"

#include <atomic>

namespace rankd {
namespace {

// Each on a cache line of its own: the stages are counted from different threads.
struct alignas(64) Counter {
  std::atomic<uint64_t> bytes{0};
};
Counter counters[kHostCopyStages];

}  // namespace

void CountHostCopy(HostCopy stage, size_t bytes) {
  counters[static_cast<int>(stage)].bytes.fetch_add(bytes, std::memory_order_relaxed);
}

uint64_t HostCopiedBytes(HostCopy stage) {
  return counters[static_cast<int>(stage)].bytes.load(std::memory_order_relaxed);
}

const char* HostCopyName(HostCopy stage) {
  switch (stage) {
    case HostCopy::kRequest:
      return "request";
    case HostCopy::kMerge:
      return "merge";
    case HostCopy::kPad:
      return "pad";
    case HostCopy::kStaging:
      return "staging";
  }
  return "unknown";
}

}  // namespace rankd
