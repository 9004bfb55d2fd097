// Owning buffers of device memory and of pinned host memory that grow and never shrink.
#pragma once

#include <cstddef>

#include "rankd/status.h"

namespace rankd::cuda {

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

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rankd::cuda
