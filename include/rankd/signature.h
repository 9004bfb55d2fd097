// A model's signature: what its requests carry and what they get back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rankd/dtype.h"

namespace rankd {

struct InputSignature {
  std::string name;
  DType dtype = DType::kInvalid;
  std::vector<int64_t> dims;  // per row, batch excluded; -1 = any size
  bool user_scope = false;    // one row per request, shared by its candidates
  bool ragged = false;        // variable-length id list per row
  int64_t max_length = 0;     // ragged: longest list accepted
  bool strings = false;       // sent as BYTES (strings), which the model turns into ids of `dtype`

  const char* datatype() const { return strings ? "BYTES" : DTypeName(dtype); }
};

struct OutputSignature {
  std::string name;
  DType dtype = DType::kInvalid;
  std::vector<int64_t> dims;  // per row, batch excluded, as the graph gives them; -1 = varies
};

}  // namespace rankd
