// A small run's inputs and outputs moved by a kernel instead of copy nodes (cuda_executor.cc): the
// kernel reads or writes the pinned staging buffers through their mapped addresses, sixteen bytes
// a thread with every access in flight at once. On the H200 a graph's input copy node kept the
// next kernel waiting 9 to 12 µs after it ended, and the output copy node started 4 to 6 µs
// after the last kernel of a graph that had no other copy; a kernel follows a kernel within
// half a microsecond (docs/benchmarks.md).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "rankd/status.h"

namespace rankd::cuda {

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned, each in device memory or
// mapped pinned memory) from `from` to `to` on `stream`, and sets *clear to 0 where it is given
// (the error word a run starts from).
Status CopyByKernel(const void* from, void* to, size_t bytes, int* clear, cudaStream_t stream);

}  // namespace rankd::cuda
