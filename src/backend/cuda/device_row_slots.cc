#include "backend/cuda/device_row_slots.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "backend/cuda/device.h"
#include "backend/cuda/row_cache.h"

namespace rankd::cuda {

StatusOr<std::unique_ptr<CudaRowSlots>> CudaRowSlots::Create(int device, int64_t slots, int64_t row_bytes) {
  if (slots < 1 || row_bytes <= 0 || row_bytes % 4 != 0)
    return InvalidArgument("row slots: " + std::to_string(slots) + " slots of " + std::to_string(row_bytes) +
                           " bytes (at least one slot, rows of whole 4-byte words)");
  std::unique_ptr<CudaRowSlots> s(new CudaRowSlots());
  s->device_ = device;
  s->count_ = slots;
  s->row_bytes_ = row_bytes;
  RANKD_CUDA_RETURN(cudaSetDevice(device));
  const auto bytes = static_cast<size_t>(slots * row_bytes);
  RANKD_RETURN_IF_ERROR(s->slots_.Reserve(bytes));
  RANKD_RETURN_IF_ERROR(
      s->staged_.Reserve(static_cast<size_t>(kBatchRows) * (2 * sizeof(int64_t) + static_cast<size_t>(row_bytes))));
  auto* order = static_cast<int64_t*>(s->staged_.get());
  for (int64_t i = 0; i < kBatchRows; ++i) order[i] = i;
  RANKD_CUDA_RETURN(cudaStreamCreateWithFlags(&s->stream_, cudaStreamNonBlocking));
  RANKD_CUDA_RETURN(cudaMemsetAsync(s->slots_.get(), 0, bytes, s->stream_));
  RANKD_CUDA_RETURN(cudaStreamSynchronize(s->stream_));
  return s;
}

CudaRowSlots::~CudaRowSlots() {
  if (!stream_) return;
  cudaStreamSynchronize(stream_);
  cudaStreamDestroy(stream_);
}

Status CudaRowSlots::Write(std::span<const int64_t> slots, const uint8_t* rows) {
  for (int64_t slot : slots) {
    if (slot < 0 || slot >= count_)
      return InvalidArgument("row slots: slot " + std::to_string(slot) + " of " + std::to_string(count_));
  }
  RANKD_CUDA_RETURN(cudaSetDevice(device_));
  auto* host = static_cast<uint8_t*>(staged_.get());
  const auto* device = static_cast<const uint8_t*>(staged_.device());
  const size_t indices = static_cast<size_t>(kBatchRows) * sizeof(int64_t);
  for (size_t begin = 0; begin < slots.size(); begin += kBatchRows) {
    const size_t n = std::min(slots.size() - begin, static_cast<size_t>(kBatchRows));
    std::memcpy(host + indices, slots.data() + begin, n * sizeof(int64_t));
    std::memcpy(host + 2 * indices, rows + begin * static_cast<size_t>(row_bytes_),
                n * static_cast<size_t>(row_bytes_));
    RANKD_RETURN_IF_ERROR(LaunchCopyRows(stream_, device + 2 * indices, row_bytes_, slots_.get(),
                                         reinterpret_cast<const int64_t*>(device),
                                         reinterpret_cast<const int64_t*>(device + indices), static_cast<int64_t>(n)));
    RANKD_CUDA_RETURN(cudaStreamSynchronize(stream_));  // the staged batch is free again, the rows in place
  }
  return Status::Ok();
}

}  // namespace rankd::cuda
