// A merged batch's inputs left as their requests' parts (docs/batching.md, "Merged on the
// device"): MergeRequests allocates each such input but does not write it; a GPU's input kernel
// reads every part where it lies (a request tensor in pinned memory) into the input's place on the
// device, so the host copies none of those bytes. Any other reader has them written first (Write,
// WriteRest): the bytes are then what a merge on the host would have written. Not thread-safe:
// a batch runs on one thread.
#pragma once

#include <cstddef>
#include <vector>

#include "rankd/tensor.h"

namespace rankd {

class DeferredMerge {
 public:
  // `merged` (allocated, not written) is the concatenation of `parts` along their first dimension.
  void Add(Tensor merged, std::vector<Tensor> parts);
  // The parts of the pending input (neither written nor taken) whose bytes are exactly [data,
  // data + bytes); null if no pending input is.
  const std::vector<Tensor>* Find(const void* data, size_t bytes);
  // The same, now taken: its reader gathers the parts itself, and WriteRest leaves it unwritten.
  const std::vector<Tensor>* Take(const void* data, size_t bytes);
  // Writes every input neither written nor taken.
  void WriteRest();

 private:
  struct Input {
    Tensor merged;
    std::vector<Tensor> parts;
    bool done = false;  // written, or taken
  };
  Input* Pending(const void* data, size_t bytes);
  std::vector<Input> inputs_;
};

// Whether `t` can be one of a deferred input's parts: a pinned request tensor starting 16-byte
// aligned, whose elements are 4 or 8 bytes (the input kernel reads it four bytes at a time where it
// does not start on a 16-byte boundary of its place).
bool GatherablePart(const Tensor& t);

}  // namespace rankd
