#include "backend/cuda/mapped_copy.h"

#include <algorithm>
#include <cstdint>

#include "backend/cuda/device.h"

namespace rankd::cuda {
namespace {

constexpr int kCopyThreads = 256;
constexpr int kMaxCopyBlocks = 1024;
constexpr int64_t kBlockBytes = kCopyThreads * static_cast<int64_t>(sizeof(uint4));

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

// One block a 4 KB piece: its first thread waits for the gates the piece overlaps (the host's
// packing publishes each with a release store; the acquire load here orders the block's reads
// after it), then every thread copies its sixteen bytes.
__global__ void __launch_bounds__(kCopyThreads) GatedCopyKernel(const uint4* from, uint4* to, int64_t pieces, int* error,
                                                                 InputGates gates) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *error = 0;  // before any wait: a late gate's report stays
  if (threadIdx.x == 0) {
    const uint64_t lo = blockIdx.x * static_cast<uint64_t>(kBlockBytes), hi = lo + kBlockBytes;
    const uint64_t start = GlobalNanoseconds();
    for (int g = 0; g < gates.count; ++g) {
      const uint64_t end = g + 1 < gates.count ? gates.begin[g + 1] : ~uint64_t{0};
      if (end <= lo || gates.begin[g] >= hi) continue;
      while (LoadAcquireSystem(gates.ready + g) == 0) {
        if (GlobalNanoseconds() - start > kGateTimeoutNs) {
          atomicCAS(error, 0, kInputsLate);
          break;
        }
        __nanosleep(100);
      }
    }
  }
  __syncthreads();
  const int64_t i = blockIdx.x * static_cast<int64_t>(kCopyThreads) + threadIdx.x;
  if (i < pieces) to[i] = from[i];
}

}  // namespace

Status CopyByKernel(const void* from, void* to, size_t bytes, int* clear, cudaStream_t stream, const InputGates* gates) {
  const auto pieces = static_cast<int64_t>(bytes / sizeof(uint4));
  const int64_t blocks = (pieces + kCopyThreads - 1) / kCopyThreads;
  if (gates) {
    if (!clear) return InvalidArgument("a gated pull clears an error word");
    if (blocks > INT32_MAX) return InvalidArgument("a gated pull of " + std::to_string(bytes) + " bytes is too large");
    GatedCopyKernel<<<static_cast<int>(std::max<int64_t>(blocks, 1)), kCopyThreads, 0, stream>>>(
        static_cast<const uint4*>(from), static_cast<uint4*>(to), pieces, clear, *gates);
  } else {
    CopyKernel<<<static_cast<int>(std::clamp<int64_t>(blocks, 1, kMaxCopyBlocks)), kCopyThreads, 0, stream>>>(
        static_cast<const uint4*>(from), static_cast<uint4*>(to), pieces, clear);
  }
  return Check(cudaGetLastError(), "a copy by kernel to or from pinned memory");
}

}  // namespace rankd::cuda
