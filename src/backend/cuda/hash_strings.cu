// CUDA kernel of HashStrings (model/ops/hash_strings.h; cpu/hash_strings.cc is the reference): a
// thread per string reads its bytes from pinned host memory in place, by aligned 8-byte words
// (the buffer's layout allows it), and hashes them with common/portable_string_hashes.h. A string
// of up to kStagedWords words is first loaded whole into the thread's slice of shared memory, its
// loads all in flight at once (one crossing of PCIe, not one per step of the hash); a longer one is
// read from host memory as the hash goes. A record that is not a string is reported through the
// executor's error word.
#include "backend/cuda/device.h"
#include "backend/cuda/indexing.cuh"
#include "backend/cuda/kernels.h"
#include "common/portable_string_hashes.h"
#include "common/string_hash.h"
#include "model/ops/hash_strings.h"

namespace rankd::cuda {
namespace {

// A string's bytes through the aligned words that hold them, `stride` words apart (1 in host
// memory, kThreads in the thread's slice of shared memory).
struct WordBytes {
  const uint64_t* words;  // the aligned word holding the string's first byte
  uint64_t shift;         // the first byte's offset in it
  uint64_t stride;

  __device__ uint64_t Word(uint64_t w) const { return words[w * stride]; }
  __device__ uint64_t Load64(uint64_t i) const {
    const uint64_t at = i + shift, bits = (at & 7) * 8, w = at / 8;
    return bits == 0 ? Word(w) : (Word(w) >> bits) | (Word(w + 1) << (64 - bits));
  }
  __device__ uint32_t Load32(uint64_t i) const { return static_cast<uint32_t>(Load64(i)); }
  __device__ uint8_t Byte(uint64_t i) const {
    const uint64_t at = i + shift;
    return static_cast<uint8_t>(Word(at / 8) >> ((at & 7) * 8));
  }
};

// Words of a string staged in shared memory: W4s's strings of 5 to 12 bytes take 2 or 3.
constexpr int kStagedWords = 6;

template <typename Id>
__global__ void __launch_bounds__(kThreads)
    HashStringsKernel(const int64_t* records, int64_t count, int function, uint64_t seed, uint64_t buckets, Id* out,
                      int* error, int step) {
  __shared__ uint64_t staged[kStagedWords][kThreads];  // word j of thread t at [j][t]: no bank conflicts
  RANKD_GRID_LOOP(i, count) {
    const int64_t at = records[2 * i], length = records[2 * i + 1];
    if (length == hash_strings::kPrehashed) {
      out[i] = static_cast<Id>(at);
      continue;
    }
    if (length < 0 || (length > 0 && at == 0)) {
      ReportBadData(error, step);
      out[i] = 0;
      continue;
    }
    const auto address = static_cast<uint64_t>(at);
    const auto n = static_cast<uint64_t>(length);
    const auto* words = reinterpret_cast<const uint64_t*>(address & ~uint64_t{7});
    WordBytes r{words, address & 7, 1};
    const uint64_t needed = ((address & 7) + n + 7) / 8 + 1;  // and the word a funnel may read past the end
    if (n > 0 && needed <= kStagedWords) {  // an empty string reads nothing (a padded row's is at address 0)
      uint64_t* mine = &staged[0][threadIdx.x];
#pragma unroll
      for (int j = 0; j < kStagedWords; ++j) {
        if (j < static_cast<int>(needed)) mine[j * kThreads] = words[j];
      }
      r = {mine, address & 7, kThreads};
    }
    uint64_t h;
    switch (static_cast<StringHash>(function)) {
      case StringHash::kFingerprint64:
        h = portable_hash::farm::Fingerprint64(r, n);
        break;
      case StringHash::kXxHash64:
        h = portable_hash::xx::Hash64(r, n, seed);
        break;
      default:
        h = portable_hash::murmur::Hash32(r, n, static_cast<uint32_t>(seed));
        break;
    }
    out[i] = static_cast<Id>(h % buckets);
  }
}

Status HashStrings(const KernelArgs& k) {
  const Tensor& records = k.In(0);
  Tensor& out = k.Out(0);
  if (out.size() == 0) return Status::Ok();
  const auto function = static_cast<int>(*StringHashFromName(k.node.GetString("function", "")));
  const auto seed = static_cast<uint64_t>(k.node.GetInt("seed", 0));
  const auto buckets = static_cast<uint64_t>(k.node.GetInt("buckets", 1));
  if (out.dtype() == DType::kI32) {
    HashStringsKernel<<<Blocks(out.size()), kThreads, 0, k.device->stream>>>(
        records.data<int64_t>(), out.size(), function, seed, buckets, out.data<int32_t>(), k.device->error, k.step);
  } else {
    HashStringsKernel<<<Blocks(out.size()), kThreads, 0, k.device->stream>>>(
        records.data<int64_t>(), out.size(), function, seed, buckets, out.data<int64_t>(), k.device->error, k.step);
  }
  return Launched(k);
}

}  // namespace

void AppendStringKernels(KernelTable& out) { out["HashStrings"] = HashStrings; }

}  // namespace rankd::cuda
