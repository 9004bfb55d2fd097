#include "backend/cuda/mapped_copy.h"

#include <algorithm>
#include <cstdint>

#include "backend/cuda/device.h"

namespace rankd::cuda {
namespace {

constexpr int kCopyThreads = 256;
constexpr int kMaxCopyBlocks = 1024;

__global__ void __launch_bounds__(kCopyThreads) CopyKernel(const uint4* from, uint4* to, int64_t pieces, int* clear) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kCopyThreads;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kCopyThreads) + threadIdx.x; i < pieces; i += stride) to[i] = from[i];
  if (clear && blockIdx.x == 0 && threadIdx.x == 0) *clear = 0;
}

}  // namespace

Status CopyByKernel(const void* from, void* to, size_t bytes, int* clear, cudaStream_t stream) {
  const auto pieces = static_cast<int64_t>(bytes / sizeof(uint4));
  const auto blocks = static_cast<int>(std::clamp<int64_t>((pieces + kCopyThreads - 1) / kCopyThreads, 1, kMaxCopyBlocks));
  CopyKernel<<<blocks, kCopyThreads, 0, stream>>>(static_cast<const uint4*>(from), static_cast<uint4*>(to), pieces, clear);
  return Check(cudaGetLastError(), "a copy by kernel to or from pinned memory");
}

}  // namespace rankd::cuda
