// Where tensors' host memory comes from: the C++ heap, unless a backend installs an allocator.
//
// The CUDA backend installs one of page-locked memory the GPU reads directly (backend/cuda/
// pinned_pool.h). It serves only request tensors: those made while a RequestTensorScope is alive
// on the thread (a request parsed by the HTTP or gRPC frontend or from a benchmark's request file,
// the graph inputs built from it, their padding and merging), so that they reach the device
// without first being copied into a staging buffer. Weights and every other tensor take the heap.
#pragma once

#include <cstddef>

#include "rankd/tensor.h"

namespace rankd {

class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  // `bytes` of memory aligned to 64 bytes, or nullptr to let the heap serve them.
  virtual void* Allocate(size_t bytes) = 0;
  // Takes back what Allocate gave, with the same `bytes`.
  virtual void Free(void* p, size_t bytes) = 0;
  // Where what Allocate gives lies (the tensors' location()).
  virtual MemoryLocation location() const = 0;
  // The memory it holds now, given out or free (rankd_request_tensor_pool_bytes).
  virtual size_t reserved_bytes() const = 0;
};

// Installs `allocator` for request tensors made later by Tensor::Empty and Tensor::Zeros (nullptr:
// the heap again). It must outlive every tensor it allocates: in practice, the process.
void SetHostAllocator(HostAllocator* allocator);
HostAllocator* CurrentHostAllocator();
// Request tensors the installed allocator could not serve (full, too large, or busy: pinned_pool.h), which
// took the heap instead, since the process started (rankd_request_tensors_on_heap_total).
uint64_t RequestTensorsOnHeap();

// While alive, tensors this thread makes are request tensors. Scopes nest.
class RequestTensorScope {
 public:
  RequestTensorScope();
  ~RequestTensorScope();
  RequestTensorScope(const RequestTensorScope&) = delete;
  RequestTensorScope& operator=(const RequestTensorScope&) = delete;

 private:
  bool was_;
};

}  // namespace rankd
