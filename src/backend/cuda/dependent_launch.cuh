// Programmatic dependent launch (Hopper): a kernel launched with LaunchDependent may start while
// the kernel before it on the stream is still finishing, and runs its set-up (barriers, tensor
// map descriptors, loads of weights) meanwhile; WaitForPrevious then waits until that kernel has
// finished and its writes are visible. Before WaitForPrevious a kernel may only touch its shared
// memory and read constants (weights, biases): what the kernels before it write may not be there
// yet, and what it writes could still be read by them. A kernel that calls LetNextStart lets the
// next one's blocks be scheduled once all its own blocks have called it (or exited), instead of
// once it has finished. Captured into a CUDA graph, the launch becomes a programmatic edge.
// The fused multiply-add, split-k and few-rows products launch so (W1's device span on an H200:
// 0.100–0.105 → 0.094–0.096 ms at 64 pairs, most of it the multiply-adds' early weights; unchanged
// at 512; docs/log/benchmarks.md). The bag concatenation does not: at 512 pairs its many blocks,
// placed early, cost about 2 µs. RANKD_PDL=0 launches every such kernel as any other (for A/B
// measurements).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "backend/cuda/device.h"
#include "backend/cuda/settings.h"

namespace rankd::cuda {

__device__ __forceinline__ void WaitForPrevious() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void LetNextStart() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

inline bool DependentLaunchOn() { return DependentLaunches(); }

// kernel<<<grid, block, smem, stream>>>(args...), allowed to start before the previous kernel on
// the stream has finished (the kernel calls WaitForPrevious first), with `extra` (a cluster's
// dimensions, say) when given.
template <typename... Params, typename... Args>
cudaError_t LaunchDependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                            const cudaLaunchAttribute* extra, Args&&... args) {
  cudaLaunchAttribute attrs[2];
  unsigned count = 0;
  if (extra) attrs[count++] = *extra;
  if (DependentLaunchOn()) {
    attrs[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = count ? attrs : nullptr;
  config.numAttrs = count;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace rankd::cuda
