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
// A merged batch's input may come from several sources, one per request (common/deferred_merge.h):
// its slot's first at the slot, each next where the one before ends.
struct InputSource {
  const void* from;     // 16-byte aligned; a kernel reads it here
  uint64_t from_bytes;  // bytes at `from`: INT64 ids when `narrow`
  // Offset in the input area (ascending): 16-byte aligned where a slot starts, else 4-byte aligned
  // (a later part of a slot, whose elements are 4 or 8 bytes).
  uint64_t to;
  uint64_t to_bytes;  // the bytes it fills there: after what `from` fills, -1 (a slot's last source: to its end)
  uint32_t narrow;    // INT64 ids written as INT32, clamped (compile/narrowable_ids.h)
  uint32_t unused;
};

// The sources of a run's input kernels, as the host writes them in mapped pinned memory: this
// header, then `count` InputSources, those of the floats first where the ids gather late.
struct GatherTable {
  uint32_t count;  // sources listed
  uint32_t late;   // the first of the ids' sources (a gather of kIds); count where the ids do not gather late
  uint64_t unused;
};
inline const InputSource* SourcesOf(const GatherTable* table) {
  return reinterpret_cast<const InputSource*>(table + 1);
}
inline InputSource* SourcesOf(GatherTable* table) { return reinterpret_cast<InputSource*>(table + 1); }

// Which of a table's sources a gather takes: all, those before `late`, or those from it.
enum class GatherPart : int { kAll, kFloats, kIds };

// Fills bytes [begin, end) (multiples of 16) of the input area `to` from the sources `part` takes
// of `table` (at most `max_sources` of them, their slots covering that range; mapped pinned memory,
// read by every block when the kernel runs, so a captured graph takes each run's sources and
// their count as the host wrote them before launching it), and sets *clear to 0 where it is given.
Status GatherByKernel(const GatherTable* table, GatherPart part, int max_sources, void* to, size_t begin, size_t end,
                      int* clear, cudaStream_t stream);

}  // namespace rankd::cuda
