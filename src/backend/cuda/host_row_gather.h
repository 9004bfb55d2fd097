// Rows of tables held in host memory read in address order: a large run's ids of such tables
// sorted on the device, each distinct row read once over the bus into device memory, and every id
// rewritten as its row's place there.
//
// A lookup kernel reads a table in host memory in place, row by row in the order of its bags: from
// tens of GiB that runs at about 8 GB/s (the GPU's translation of so many host pages, whatever
// their size), where the same rows read in address order, one in 50 of the table's, go at about
// 35 GB/s, the sort's time counted (docs/log/benchmarks.md, "misses sorted on the device"). So,
// before the steps of a run whose bags read many ids of such tables (runtime/cuda/placed_ids.h
// decides which), the ids are keyed by table and row, sorted (CUB's radix sort), each distinct row
// copied into `rows` (device memory) in that order, and each id replaced by -2 - its row's offset
// there in kStagedUnitBytes units: what a lookup reads as a staged row (device.h's RowCacheView).
// Rows past the room stay ids, read in place; an empty slot (a negative id) becomes -1 and an id
// past its table the table's row count, which the lookup reports as ever. So a run scores exactly
// as with the rows read in place.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "rankd/status.h"

namespace rankd::cuda {

// One graph input's ids (in device memory, rewritten in place) and the table its bags read.
struct GatheredInput {
  void* ids = nullptr;
  int64_t n = 0;
  bool wide = true;             // INT64 ids, else INT32
  const void* table = nullptr;  // the table's rows as the device reads them (mapped host memory)
  int64_t table_rows = 0;
  int64_t row_bytes = 0;  // a multiple of kStagedUnitBytes
};

// Inputs one gather takes at most (a launch's parameters stay under 4 KiB).
constexpr size_t kMostGatheredInputs = 40;

// The device scratch a gather of `inputs` needs (their ids' keys, places and the sort's and the
// scan's temporary storage); 0 when they cannot be gathered (more than kMostGatheredInputs, or
// more ids than a place can name).
size_t HostRowGatherScratchBytes(std::span<const GatheredInput> inputs);

// Enqueues the gather of `inputs` on `stream`: the distinct rows into `rows` (device memory, room
// for `room_units` units of kStagedUnitBytes), every id rewritten (above). `scratch` holds
// HostRowGatherScratchBytes(inputs) bytes of device memory. Capturable: no allocation, no wait.
Status GatherHostRows(std::span<const GatheredInput> inputs, void* scratch, size_t scratch_bytes, void* rows,
                      size_t room_units, cudaStream_t stream);

}  // namespace rankd::cuda
