// Where tensors' host memory comes from: the C++ heap, unless a backend installs an allocator.
//
// The CUDA backend installs one of page-locked memory the GPU reads directly (backend/cuda/
// pinned_pool.h), so that a request parsed after that (by the HTTP or gRPC frontend, or a
// benchmark's request file) and the graph inputs built from it reach the device without first
// being copied into a staging buffer.
#pragma once

#include <cstddef>

namespace rankd {

class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  // `bytes` of memory aligned to 64 bytes, or nullptr to let the heap serve them.
  virtual void* Allocate(size_t bytes) = 0;
  // Takes back what Allocate gave, with the same `bytes`.
  virtual void Free(void* p, size_t bytes) = 0;
};

// Installs `allocator` for every later Tensor::Empty and Tensor::Zeros (nullptr: the heap again).
// It must outlive every tensor it allocates: in practice, the process.
void SetHostAllocator(HostAllocator* allocator);
HostAllocator* CurrentHostAllocator();

}  // namespace rankd
