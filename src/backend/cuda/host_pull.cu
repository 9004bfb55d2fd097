#include "backend/cuda/host_pull.h"

#include <algorithm>
#include <cstdint>

#include "backend/cuda/device.h"

namespace rankd::cuda {
namespace {

constexpr int kPullThreads = 256;
constexpr int kMaxPullBlocks = 1024;

__global__ void __launch_bounds__(kPullThreads) PullKernel(const uint4* from, uint4* to, int64_t pieces, int* error) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kPullThreads;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kPullThreads) + threadIdx.x; i < pieces; i += stride) to[i] = from[i];
  if (blockIdx.x == 0 && threadIdx.x == 0) *error = 0;
}

}  // namespace

Status PullFromHost(const void* from, void* to, size_t bytes, int* error, cudaStream_t stream) {
  const auto pieces = static_cast<int64_t>(bytes / sizeof(uint4));
  const auto blocks = static_cast<int>(std::clamp<int64_t>((pieces + kPullThreads - 1) / kPullThreads, 1, kMaxPullBlocks));
  PullKernel<<<blocks, kPullThreads, 0, stream>>>(static_cast<const uint4*>(from), static_cast<uint4*>(to), pieces, error);
  return Check(cudaGetLastError(), "pulling the inputs from pinned memory");
}

bool IsPullKernel(const void* function) { return function == reinterpret_cast<const void*>(&PullKernel); }

}  // namespace rankd::cuda
