// The kernels of CudaRowCache::Apply (row_cache.h): unmapping rows, copying rows from the host
// table into slots, and mapping them.
#include "backend/cuda/device.h"
#include "backend/cuda/indexing.cuh"
#include "backend/cuda/row_cache.h"

namespace rankd::cuda {
namespace {

__global__ void UnmapRowsKernel(int32_t* slot_of_row, const int64_t* rows, int64_t n) {
  RANKD_GRID_LOOP(i, n) { slot_of_row[rows[i]] = -1; }
}

__global__ void MapRowsKernel(int32_t* slot_of_row, const int64_t* rows, const int64_t* slots, int64_t n) {
  RANKD_GRID_LOOP(i, n) { slot_of_row[rows[i]] = static_cast<int32_t>(slots[i]); }
}

// A warp per row, in 16-byte words where the row's width allows, else 4-byte or single bytes.
template <typename Word>
__global__ void CopyRowsKernel(const Word* table, int64_t row_words, Word* slots_base, const int64_t* rows,
                               const int64_t* slots, int64_t n) {
  constexpr int kWarp = 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarp;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; i < n; i += warps) {
    const Word* from = table + rows[i] * row_words;
    Word* to = slots_base + slots[i] * row_words;
    for (int64_t w = lane; w < row_words; w += kWarp) to[w] = from[w];
  }
}

}  // namespace

Status LaunchUnmapRows(cudaStream_t stream, int32_t* slot_of_row, const int64_t* rows, int64_t n) {
  UnmapRowsKernel<<<Blocks(n), kThreads, 0, stream>>>(slot_of_row, rows, n);
  return Check(cudaGetLastError(), "UnmapRowsKernel");
}

Status LaunchMapRows(cudaStream_t stream, int32_t* slot_of_row, const int64_t* rows, const int64_t* slots, int64_t n) {
  MapRowsKernel<<<Blocks(n), kThreads, 0, stream>>>(slot_of_row, rows, slots, n);
  return Check(cudaGetLastError(), "MapRowsKernel");
}

Status LaunchCopyRows(cudaStream_t stream, const void* table, int64_t row_bytes, void* slots_base, const int64_t* rows,
                      const int64_t* slots, int64_t n) {
  const unsigned blocks = Blocks(n * 32);
  const auto aligned = [&](int64_t word) {
    return row_bytes % word == 0 && reinterpret_cast<uintptr_t>(table) % word == 0 &&
           reinterpret_cast<uintptr_t>(slots_base) % word == 0;
  };
  if (aligned(16)) {
    CopyRowsKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint4*>(table), row_bytes / 16,
                                                    static_cast<uint4*>(slots_base), rows, slots, n);
  } else if (aligned(4)) {
    CopyRowsKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint32_t*>(table), row_bytes / 4,
                                                    static_cast<uint32_t*>(slots_base), rows, slots, n);
  } else {
    CopyRowsKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint8_t*>(table), row_bytes,
                                                    static_cast<uint8_t*>(slots_base), rows, slots, n);
  }
  return Check(cudaGetLastError(), "CopyRowsKernel");
}

}  // namespace rankd::cuda
