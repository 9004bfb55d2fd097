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
};

struct InferOutput {
  std::string name;
  Tensor data;
};

}  // namespace rankd
