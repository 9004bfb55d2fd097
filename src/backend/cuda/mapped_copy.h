// A small run's inputs and outputs moved by a kernel instead of copy nodes (cuda_executor.cc): the
// kernel reads or writes the pinned staging buffers through their mapped addresses, sixteen bytes
// a thread with every access in flight at once. On the H200 a graph's input copy node kept the
// next kernel waiting 9 to 12 µs after it ended, and the output copy node started 4 to 6 µs
// after the last kernel of a graph that had no other copy; a kernel follows a kernel within
// half a microsecond (docs/log/benchmarks.md).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "rankd/status.h"

namespace rankd::cuda {

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned, each in device memory or
// mapped pinned memory) from `from` to `to` on `stream`.
Status CopyByKernel(const void* from, void* to, size_t bytes, cudaStream_t stream);

// Where one input of a small run comes from (a request's tensor in the pinned pool, or its slot
// of the staging buffer where it had to be packed) and where it goes in the device's input area.
struct InputSource {
  const void* from;     // 16-byte aligned; a kernel reads it here
  uint64_t from_bytes;  // bytes at `from`: INT64 ids when `narrow`
  uint64_t to;          // offset of its slot in the input area (16-byte aligned, ascending)
  uint64_t to_bytes;    // the slot's bytes: after what `from` fills, the slot is set to -1
  uint32_t narrow;      // INT64 ids written as INT32, clamped (compile/narrowable_ids.h)
  uint32_t unused;
};

// Fills bytes [begin, end) (multiples of 16) of the input area `to` from the `count` sources listed
// at `sources`, whose slots cover that range (mapped pinned memory, read by every block when the
// kernel runs, so a captured graph takes each run's sources as the host wrote them before
// launching it), and sets *clear to 0 where it is given.
Status GatherByKernel(const InputSource* sources, int count, void* to, size_t begin, size_t end, int* clear,
                      cudaStream_t stream);

}  // namespace rankd::cuda
