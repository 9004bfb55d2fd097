// Owning buffers of device memory and of pinned host memory that grow and never shrink.
#pragma once

#include <cstddef>
#include <shared_mutex>

#include "rankd/status.h"

namespace rankd::cuda {

// A stream capture on one thread is invalidated when another thread makes a call that may
// synchronise the device (cudaFree, cudaFreeHost, a synchronous copy): "operation failed due to a
// previous error during capture". Each device has a gate: captures hold their device's shared; a
// call whose effect stays on one device (cudaMalloc and cudaFree, a synchronous copy) holds that
// device's exclusively, so it waits for the device's running captures (milliseconds) and they wait
// for it, while other devices capture on. A call that reaches every device (page-locking or freeing
// host memory, loading code) holds every gate (AllCaptureGates).
std::shared_mutex& CaptureGate(int device);

// Every device's gate held exclusively, taken in device order, for its lifetime.
class AllCaptureGates {
 public:
  AllCaptureGates();
  // Takes them only if none is held by anyone now (owns() says whether it did); never waits.
  explicit AllCaptureGates(std::try_to_lock_t);
  ~AllCaptureGates();
  AllCaptureGates(const AllCaptureGates&) = delete;
  AllCaptureGates& operator=(const AllCaptureGates&) = delete;
  bool owns() const { return owns_; }

 private:
  bool owns_ = false;
};

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
  int device_ = 0;  // where it was allocated (the current device then)
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
