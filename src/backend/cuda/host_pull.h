// Small inputs brought to the device by a kernel instead of a copy (cuda_executor.cc): the
// kernel reads the pinned staging buffer through its mapped address, sixteen bytes a thread with
// every load in flight at once. On the H200, a graph's copy node kept the next kernel waiting 9
// to 12 µs after it ended; a kernel is followed as any kernel is (docs/benchmarks.md).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "rankd/status.h"

namespace rankd::cuda {

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from mapped pinned memory
// at `from` to device memory at `to`, and clears the error word `error`, on `stream`.
Status PullFromHost(const void* from, void* to, size_t bytes, int* error, cudaStream_t stream);

// Whether a graph's kernel node runs `function` as PullFromHost's kernel (counted as a copy).
bool IsPullKernel(const void* function);

}  // namespace rankd::cuda
