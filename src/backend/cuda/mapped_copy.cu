#include "backend/cuda/mapped_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/device.h"

namespace rankd::cuda {
namespace {

constexpr int kCopyThreads = 256;
constexpr int kMaxCopyBlocks = 1024;
constexpr int kGateThreads = 1024;

__global__ void __launch_bounds__(kCopyThreads) CopyKernel(const uint4* from, uint4* to, int64_t pieces, int* clear) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kCopyThreads;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kCopyThreads) + threadIdx.x; i < pieces; i += stride) to[i] = from[i];
  if (clear && blockIdx.x == 0 && threadIdx.x == 0) *clear = 0;
}

__device__ __forceinline__ uint32_t LoadAcquireSystem(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint64_t GlobalNanoseconds() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One block a gate: its first thread waits for the gate (the host's packing publishes it with a
// release store; the acquire, or a volatile load and a fence, orders the block's reads after it),
// then the block copies the gate's bytes.
__global__ void __launch_bounds__(kGateThreads) GatedCopyKernel(const uint4* from, uint4* to, int64_t pieces, int* error,
                                                                InputGates gates, int poll) {
  const int g = static_cast<int>(blockIdx.x);
  if (g == 0 && threadIdx.x == 0) *error = 0;  // before any wait: a late gate's report stays
  if (threadIdx.x == 0) {
    const uint64_t start = GlobalNanoseconds();
    const volatile uint32_t* word = gates.ready + g;
    while (poll == 0 ? LoadAcquireSystem(gates.ready + g) == 0 : *word == 0) {
      if (GlobalNanoseconds() - start > kGateTimeoutNs) {
        atomicCAS(error, 0, kInputsLate);
        break;
      }
      __nanosleep(poll == 0 ? 100 : 500);
    }
    if (poll != 0) __threadfence();
  }
  __syncthreads();
  const int64_t begin = g == 0 ? 0 : gates.begin[g] / static_cast<int64_t>(sizeof(uint4));
  const int64_t end = g + 1 < gates.count ? gates.begin[g + 1] / static_cast<int64_t>(sizeof(uint4)) : pieces;
  for (int64_t i = begin + threadIdx.x; i < end; i += kGateThreads) to[i] = from[i];
}

}  // namespace

Status CopyByKernel(const void* from, void* to, size_t bytes, int* clear, cudaStream_t stream, const InputGates* gates) {
  const auto pieces = static_cast<int64_t>(bytes / sizeof(uint4));
  const int64_t blocks = (pieces + kCopyThreads - 1) / kCopyThreads;
  if (gates) {
    if (!clear || gates->count < 1) return InvalidArgument("a gated pull has gates and clears an error word");
    static const int poll = std::getenv("RANKD_GATE_POLL") ? std::atoi(std::getenv("RANKD_GATE_POLL")) : 0;
    GatedCopyKernel<<<gates->count, kGateThreads, 0, stream>>>(static_cast<const uint4*>(from), static_cast<uint4*>(to), pieces,
                                                             clear, *gates, poll);
  } else {
    CopyKernel<<<static_cast<int>(std::clamp<int64_t>(blocks, 1, kMaxCopyBlocks)), kCopyThreads, 0, stream>>>(
        static_cast<const uint4*>(from), static_cast<uint4*>(to), pieces, clear);
  }
  return Check(cudaGetLastError(), "a copy by kernel to or from pinned memory");
}

}  // namespace rankd::cuda
