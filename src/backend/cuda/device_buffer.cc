#include "backend/cuda/device_buffer.h"

#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "backend/cuda/device.h"
#include "backend/cuda/device_health.h"
#include "backend/cuda/faults.h"

namespace rankd::cuda {

std::shared_mutex& CaptureGate() {
  static std::shared_mutex gate;
  return gate;
}

DeviceBuffer::~DeviceBuffer() {
  if (!ptr_) return;
  std::lock_guard<std::shared_mutex> gate(CaptureGate());
  cudaFree(ptr_);
  CountBufferedDeviceBytes(-static_cast<int64_t>(size_));
}

Status DeviceBuffer::Reserve(size_t bytes, bool* grew) {
  if (grew) *grew = false;
  if (bytes <= size_ && ptr_) return Status::Ok();
  std::lock_guard<std::shared_mutex> gate(CaptureGate());
  if (ptr_) {
    cudaFree(ptr_);
    CountBufferedDeviceBytes(-static_cast<int64_t>(size_));
    ptr_ = nullptr;
    size_ = 0;
  }
  size_t rounded = (std::max<size_t>(bytes, 256) + 255) / 256 * 256;
  if (AllocationFails(rounded)) return Check(cudaErrorMemoryAllocation, "cudaMalloc (injected fault)");
  RANKD_CUDA_RETURN(cudaMalloc(&ptr_, rounded));
  size_ = rounded;
  CountBufferedDeviceBytes(static_cast<int64_t>(size_));
  if (grew) *grew = true;
  return Status::Ok();
}

PinnedBuffer::~PinnedBuffer() {
  if (!ptr_) return;
  std::lock_guard<std::shared_mutex> gate(CaptureGate());
  cudaFreeHost(ptr_);
}

Status PinnedBuffer::Reserve(size_t bytes, bool* grew) {
  if (grew) *grew = false;
  if (bytes <= size_ && ptr_) return Status::Ok();
  std::lock_guard<std::shared_mutex> gate(CaptureGate());
  if (ptr_) {
    cudaFreeHost(ptr_);
    ptr_ = device_ptr_ = nullptr;
    size_ = 0;
  }
  size_t rounded = (std::max<size_t>(bytes, 4096) + 4095) / 4096 * 4096;
  RANKD_CUDA_RETURN(cudaHostAlloc(&ptr_, rounded, cudaHostAllocMapped));
  size_ = rounded;
  RANKD_CUDA_RETURN(cudaHostGetDevicePointer(&device_ptr_, ptr_, 0));
  if (grew) *grew = true;
  return Status::Ok();
}

}  // namespace rankd::cuda
