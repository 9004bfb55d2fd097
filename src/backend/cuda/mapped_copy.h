// A small run's inputs and outputs moved by a kernel instead of copy nodes (cuda_executor.cc): the
// kernel reads or writes the pinned staging buffers through their mapped addresses, sixteen bytes
// a thread with every access in flight at once. On the H200 a graph's input copy node kept the
// next kernel waiting 9 to 12 µs after it ended, and the output copy node started 4 to 6 µs
// after the last kernel of a graph that had no other copy; a kernel follows a kernel within
// half a microsecond (docs/benchmarks.md).
//
// The input pull may also be gated: the run is launched before the host packs its inputs, and
// each block of the pull waits until the host has opened the gates of the bytes it copies (one
// word of mapped pinned memory a gate, set once that part of the staging buffer is packed). The
// launch, the graph's start and the transfer then overlap the packing (cuda_staging.cc).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "rankd/status.h"

namespace rankd::cuda {

// The parts of a pull's bytes and the words that say each is ready: part g is the bytes from
// begin[g] to begin[g + 1] (each a multiple of 16; the last to the end of the pull, the first
// from its start), ready once ready[g] is nonzero. One block copies each part.
struct InputGates {
  static constexpr int kMax = 160;
  const uint32_t* ready = nullptr;  // mapped pinned memory, one word a gate
  int count = 0;
  uint32_t begin[kMax] = {};
};

// A pull whose gates stay shut this long writes kInputsLate into its error word and copies what
// is there: a run whose host never opened them fails rather than hangs.
constexpr int kInputsLate = -1;
constexpr uint64_t kGateTimeoutNs = 2'000'000'000;

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned, each in device memory or
// mapped pinned memory) from `from` to `to` on `stream`, and sets *clear to 0 where it is given
// (the error word a run starts from). With `gates`, each part of `from` is read only once its
// gate is open.
Status CopyByKernel(const void* from, void* to, size_t bytes, int* clear, cudaStream_t stream,
                    const InputGates* gates = nullptr);

}  // namespace rankd::cuda
