// Owning buffers of device memory and of pinned host memory that grow and never shrink.
#pragma once

#include <cstddef>
#include <shared_mutex>

#include "rankd/status.h"

namespace rankd::cuda {

// A stream capture on one thread is invalidated when another thread makes a call that may
// synchronise the device (cudaFree, cudaFreeHost, a synchronous copy): "operation failed due to a
// previous error during capture". Captures hold this gate shared; such calls hold it exclusively,
// so they wait for running captures (milliseconds) and captures wait for them.
std::shared_mutex& CaptureGate();

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  // Makes the buffer at least `bytes` long; old contents are lost when it grows. Sets *grew.
  Status Reserve(size_t bytes, bool* grew = nullptr);
  void* get() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();
  // As DeviceBuffer::Reserve.
  Status Reserve(size_t bytes, bool* grew = nullptr);
  void* get() const { return ptr_; }
  // The address kernels read and write the buffer at (mapped pinned memory: the same as get()
  // under unified addressing).
  void* device() const { return device_ptr_; }

 private:
  void* ptr_ = nullptr;
  void* device_ptr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rankd::cuda
