#include <algorithm>
#include <cstdint>

#include "backend/cuda/device.h"
#include "backend/cuda/mapped_copy.h"

namespace rankd::cuda {
namespace {

constexpr int kCopyThreads = 256;
constexpr int kMaxCopyBlocks = 1024;

__global__ void __launch_bounds__(kCopyThreads) CopyKernel(const uint4* from, uint4* to, int64_t pieces) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kCopyThreads;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kCopyThreads) + threadIdx.x; i < pieces; i += stride)
    to[i] = from[i];
}

// An INT64 id as the INT32 a narrowed slot holds, clamped (compile/narrowable_ids.h).
__device__ int32_t Narrowed(int64_t id) {
  return static_cast<int32_t>(max(static_cast<int64_t>(INT32_MIN), min(static_cast<int64_t>(INT32_MAX), id)));
}

// Sixteen bytes of source `s` at offset `at` (a multiple of 16) of what it fills.
__device__ uint4 Gathered(const InputSource& s, uint64_t at) {
  const auto* from = static_cast<const uint8_t*>(s.from);
  if (s.narrow) {  // four ids: 32 bytes read, 16 written
    const uint64_t first = at / 4, count = s.from_bytes / 8;
    int32_t out[4];
    if (first + 4 <= count) {
      const uint4 a = reinterpret_cast<const uint4*>(from)[first / 2],
                  b = reinterpret_cast<const uint4*>(from)[first / 2 + 1];
      const uint32_t words[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
      for (int i = 0; i < 4; ++i) {
        const auto id = static_cast<int64_t>((static_cast<uint64_t>(words[2 * i + 1]) << 32) | words[2 * i]);
        out[i] = Narrowed(id);
      }
    } else {
      for (int i = 0; i < 4; ++i) {
        const int64_t id = first + i < count ? reinterpret_cast<const int64_t*>(from)[first + i] : -1;
        out[i] = Narrowed(id);
      }
    }
    return make_uint4(static_cast<uint32_t>(out[0]), static_cast<uint32_t>(out[1]), static_cast<uint32_t>(out[2]),
                      static_cast<uint32_t>(out[3]));
  }
  if (at + 16 <= s.from_bytes) return reinterpret_cast<const uint4*>(from)[at / 16];
  uint8_t bytes[16];
  for (int i = 0; i < 16; ++i) bytes[i] = at + i < s.from_bytes ? from[at + i] : 0xff;
  uint4 v;
  memcpy(&v, bytes, sizeof(v));
  return v;
}

// The bytes of its place a source fills from its data (the rest of its to_bytes is -1).
__device__ uint64_t DataBytes(const InputSource& s) { return s.narrow ? s.from_bytes / 2 : s.from_bytes; }

// The four bytes at offset `at` (a multiple of 4) of what source `s` fills: -1 past its data.
__device__ uint32_t Word(const InputSource& s, uint64_t at) {
  if (s.narrow) {
    const uint64_t i = at / 4;
    const int64_t id = i < s.from_bytes / 8 ? static_cast<const int64_t*>(s.from)[i] : -1;
    return static_cast<uint32_t>(Narrowed(id));
  }
  if (at + 4 <= s.from_bytes) return static_cast<const uint32_t*>(s.from)[at / 4];
  uint32_t word = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t byte = at + i < s.from_bytes ? static_cast<const uint8_t*>(s.from)[at + i] : 0xffu;
    word |= byte << (8 * i);
  }
  return word;
}

// Sixteen bytes of source `s` at offset `at`, a multiple of 4 but not of 16 (a later part of a
// merged slot), all within what its data fills: two aligned reads, or four ids, shifted into place.
__device__ uint4 Shifted(const InputSource& s, uint64_t at) {
  if (s.narrow) return make_uint4(Word(s, at), Word(s, at + 4), Word(s, at + 8), Word(s, at + 12));
  const auto* from = static_cast<const uint4*>(s.from);
  const uint4 a = from[at / 16], b = from[at / 16 + 1];
  const uint32_t words[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  const auto k = static_cast<int>(at % 16 / 4);
  return make_uint4(words[k], words[k + 1], words[k + 2], words[k + 3]);
}

// Every block first reads the whole sources' table from pinned memory, so the gather runs in
// blocks of 1,024 threads: at W1's 512 pairs (35,700 pieces) its 35 blocks read 35 KB of table
// where 140 blocks of 256 read 140 KB, and the device span fell from 0.144–0.145 to 0.138 ms on
// the H200 (two pieces a thread, or four, gained nothing more; docs/log/benchmarks.md).
constexpr int kGatherThreads = 1024;
// Blocks a gather takes at most. Its reads wait on PCIe, and eight blocks of 1,024 threads keep the
// link as busy as more: W1's 876 KB of ids at 512 pairs crossed in 19.7 µs with 8 blocks, 20.5 with
// the 54 its pieces would fill. More blocks only held SMs that the bottom MLP's kernels, running
// beside the gather, then waited for: they ended at 19.8 µs with 8 blocks and at 26.1 with 54 (H200;
// docs/log/benchmarks.md).
constexpr int kMaxGatherBlocks = 8;

__global__ void __launch_bounds__(kGatherThreads)
    GatherKernel(const GatherTable* table, GatherPart part, int max_sources, uint4* to, int64_t first, int64_t end,
                 int* clear) {
  extern __shared__ InputSource slots[];
  const GatherTable t = *table;
  const auto late = static_cast<int>(min(t.late, t.count));
  const int begin = part == GatherPart::kIds ? late : 0;
  const int count = min((part == GatherPart::kFloats ? late : static_cast<int>(t.count)) - begin, max_sources);
  const InputSource* sources = reinterpret_cast<const InputSource*>(table + 1) + begin;  // SourcesOf
  for (int i = threadIdx.x; i < count; i += kGatherThreads) slots[i] = sources[i];
  __syncthreads();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kGatherThreads;
  for (int64_t i = first + blockIdx.x * static_cast<int64_t>(kGatherThreads) + threadIdx.x; count > 0 && i < end;
       i += stride) {
    const uint64_t at = static_cast<uint64_t>(i) * 16;
    int lo = 0, hi = count - 1;  // the last source starting at or before `at`
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (slots[mid].to <= at)
        lo = mid;
      else
        hi = mid - 1;
    }
    const InputSource& s = slots[lo];
    if (at < s.to) continue;  // before the first slot
    const uint64_t offset = at - s.to;
    // Whether these sixteen bytes are the source's alone (no later part of its slot starts inside them).
    const bool alone = lo + 1 >= count || slots[lo + 1].to >= at + 16;
    if (alone && offset % 16 == 0) {
      if (offset < s.to_bytes) to[i] = Gathered(s, offset);
    } else if (alone && offset + 16 <= DataBytes(s)) {
      to[i] = Shifted(s, offset);
    } else {  // where parts of a merged slot meet, or a part's last bytes: word by word
      uint32_t words[4];
      int k = lo;
      for (int w = 0; w < 4; ++w) {
        const uint64_t place = at + 4 * static_cast<uint64_t>(w);
        while (k + 1 < count && slots[k + 1].to <= place) ++k;
        const InputSource& source = slots[k];
        words[w] = place - source.to < source.to_bytes ? Word(source, place - source.to) : 0xffffffffu;
      }
      to[i] = make_uint4(words[0], words[1], words[2], words[3]);
    }
  }
  if (clear && blockIdx.x == 0 && threadIdx.x == 0) *clear = 0;
}

}  // namespace

Status GatherByKernel(const GatherTable* table, GatherPart part, int max_sources, void* to, size_t begin, size_t end,
                      int* clear, cudaStream_t stream) {
  const auto first = static_cast<int64_t>(begin / sizeof(uint4)), last = static_cast<int64_t>(end / sizeof(uint4));
  const auto blocks =
      static_cast<int>(std::clamp<int64_t>((last - first + kGatherThreads - 1) / kGatherThreads, 1, kMaxGatherBlocks));
  const size_t shared = static_cast<size_t>(std::max(max_sources, 1)) * sizeof(InputSource);
  GatherKernel<<<blocks, kGatherThreads, shared, stream>>>(table, part, max_sources, static_cast<uint4*>(to), first,
                                                           last, clear);
  return Check(cudaGetLastError(), "gathering a run's inputs by kernel");
}

Status CopyByKernel(const void* from, void* to, size_t bytes, cudaStream_t stream) {
  const auto pieces = static_cast<int64_t>(bytes / sizeof(uint4));
  const auto blocks =
      static_cast<int>(std::clamp<int64_t>((pieces + kCopyThreads - 1) / kCopyThreads, 1, kMaxCopyBlocks));
  CopyKernel<<<blocks, kCopyThreads, 0, stream>>>(static_cast<const uint4*>(from), static_cast<uint4*>(to), pieces);
  return Check(cudaGetLastError(), "a copy by kernel to or from pinned memory");
}

}  // namespace rankd::cuda
