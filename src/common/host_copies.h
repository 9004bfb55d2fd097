// Bytes of requests' input tensors copied on the host, counted by where the copy happens
// (rankd_host_input_copy_bytes_total{stage} in the metrics): what reading shared memory and pinned
// request tensors in place saves shows here. Conversions (JSON's numbers into a tensor) are not
// copies and are not counted. Thread-safe: relaxed atomic counters, one per stage.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rankd {

enum class HostCopy : uint8_t {
  kRequest,  // from the request's wire bytes or a shared memory region into a request tensor
  kMerge,    // requests' tensors into a merged batch's
  kPad,      // a request into its shape bucket's tensors
  kStaging,  // into an executor's staging buffer for a device run
};
constexpr int kHostCopyStages = 4;

void CountHostCopy(HostCopy stage, size_t bytes);
// Bytes counted at `stage` since the process started.
uint64_t HostCopiedBytes(HostCopy stage);
// "request", "merge", "pad", "staging".
const char* HostCopyName(HostCopy stage);

}  // namespace rankd
