// CudaRowSlots: RowSlots (backend/row_slots.h) in a GPU's memory.
//
// Write stages the rows in page-locked, mapped host memory and a kernel copies each into its slot
// (CopyRowsKernel, row_cache.cu), on a stream of the slots' own, in batches of kBatchRows.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "backend/cuda/device_buffer.h"
#include "backend/row_slots.h"

namespace rankd::cuda {

class CudaRowSlots final : public RowSlots {
 public:
  // `slots` rows of `row_bytes` (a multiple of 4) on `device`, zeroed.
  static StatusOr<std::unique_ptr<CudaRowSlots>> Create(int device, int64_t slots, int64_t row_bytes);
  ~CudaRowSlots() override;
  CudaRowSlots(const CudaRowSlots&) = delete;
  CudaRowSlots& operator=(const CudaRowSlots&) = delete;

  const void* device() const override { return slots_.get(); }
  int64_t slots() const override { return count_; }
  int64_t row_bytes() const override { return row_bytes_; }
  Status Write(std::span<const int64_t> slots, const uint8_t* rows) override;

 private:
  CudaRowSlots() = default;
  static constexpr int64_t kBatchRows = 8192;

  int device_ = 0;
  int64_t count_ = 0, row_bytes_ = 0;
  DeviceBuffer slots_;
  PinnedBuffer staged_;  // a batch: its rows' indices (0..n-1), their slots (int64 each), then the rows
  cudaStream_t stream_ = nullptr;
};

}  // namespace rankd::cuda
