#include "backend/cuda/device_buffer.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
#include <string>

#include "backend/cuda/device.h"
#include "backend/cuda/device_health.h"
#include "backend/cuda/faults.h"
#include "backend/cuda/per_device.h"

namespace rankd::cuda {

namespace {

std::shared_mutex* Gates() {
  static std::shared_mutex gates[kMaxDevices];
  return gates;
}

}  // namespace

std::shared_mutex& CaptureGate(int device) { return Gates()[device >= 0 && device < kMaxDevices ? device : 0]; }

AllCaptureGates::AllCaptureGates() : owns_(true) {
  for (int d = 0; d < kMaxDevices; ++d) Gates()[d].lock();
}

AllCaptureGates::AllCaptureGates(std::try_to_lock_t) {
  int taken = 0;
  while (taken < kMaxDevices && Gates()[taken].try_lock()) ++taken;
  owns_ = taken == kMaxDevices;
  if (!owns_) {
    while (taken > 0) Gates()[--taken].unlock();
  }
}

AllCaptureGates::~AllCaptureGates() {
  if (!owns_) return;
  for (int d = kMaxDevices - 1; d >= 0; --d) Gates()[d].unlock();
}

DeviceBuffer::~DeviceBuffer() {
  if (!ptr_) return;
  std::lock_guard<std::shared_mutex> gate(CaptureGate(device_));
  cudaFree(ptr_);
  CountBufferedDeviceBytes(-static_cast<int64_t>(size_));
}

Status DeviceBuffer::Reserve(size_t bytes, bool* grew) {
  if (grew) *grew = false;
  if (bytes <= size_ && ptr_) return Status::Ok();
  const int device = std::max(CurrentDevice(), 0);
  if (ptr_ && device != device_) return Internal("a device buffer grown on another device than its own");
  std::lock_guard<std::shared_mutex> gate(CaptureGate(device));
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
  device_ = device;
  CountBufferedDeviceBytes(static_cast<int64_t>(size_));
  if (grew) *grew = true;
  return Status::Ok();
}

PinnedBuffer::~PinnedBuffer() {
  if (!ptr_) return;
  AllCaptureGates gates;
  cudaFreeHost(ptr_);
}

Status PinnedBuffer::Reserve(size_t bytes, bool* grew) {
  if (grew) *grew = false;
  if (bytes <= size_ && ptr_) return Status::Ok();
  AllCaptureGates gates;
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
