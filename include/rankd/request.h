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
};

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
