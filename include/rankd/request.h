// Inference requests and results, as rankd's engine takes and returns them.
#pragma once

#include <string>
#include <vector>

#include "rankd/tensor.h"

namespace rankd {

struct InferInput {
  std::string name;
  // Dense: [rows, dims...]. Ragged: flat values [total] with `lengths`, or padded [rows, length]
  // (negative ids are empty slots) with `lengths` empty.
  Tensor data;
  std::vector<int64_t> lengths;
  // The lengths summed where they were read (SumLengths; the HTTP and gRPC parsers call it):
  // INT64 offsets [lengths.size() + 1], offsets[r] = lengths[0] + ... + lengths[r - 1], and the
  // least and largest length. A model takes them in place of a pass over the lengths of its own
  // when offsets has lengths.size() + 1 elements, so code that changes the lengths of a parsed
  // input calls SumLengths again (or resets offsets).
  Tensor offsets{};
  int64_t min_length = 0, max_length = 0;
  // INT64 values the parser held as INT32, each clamped to INT32's range, for an input whose ids
  // the model takes in 32 bits (Model::TakesIdsIn32Bits): `data` is then INT32. Half the bytes
  // to hold and to send to a GPU; a clamped id is out of range of any table the model takes so.
  bool ids_in_32_bits = false;
};

// Fills in.offsets, min_length and max_length from in.lengths. The offsets are a request tensor
// where a RequestTensorScope is alive (pinned where a GPU reads them: common/host_allocator.h).
void SumLengths(InferInput& in);

struct InferRequest {
  std::string id;
  std::vector<InferInput> inputs;
  std::vector<std::string> outputs;  // requested outputs; empty = all
  // For models with batching (docs/batching.md), as Triton's request parameters: priority 1 is
  // the highest, 0 the model's default; a request still queued `timeout_us` after it arrived is
  // answered DEADLINE_EXCEEDED without running (0: the model's default timeout).
  int priority = 0;
  int64_t timeout_us = 0;
};

struct InferOutput {
  std::string name;
  Tensor data;
};

}  // namespace rankd
