// A CUDA driver function found through the runtime (cudaGetDriverEntryPointByVersion), so that
// rankd links libcudart only, never libcuda: the tensor-map encoder (hopper.cuh), the virtual
// memory calls that place tables on several GPUs (shared_tables.cc).
#pragma once

#include <cuda_runtime.h>

namespace rankd::cuda {

// The driver's `name` in its form of CUDA `version` (12000: 12.0), as a pointer of type F*; nullptr
// when this driver lacks it.
template <typename F>
F* DriverEntry(const char* name, unsigned version = 12000) {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &f, version, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    return nullptr;
  }
  return reinterpret_cast<F*>(f);
}

}  // namespace rankd::cuda
