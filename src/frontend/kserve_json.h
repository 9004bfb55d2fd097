// KServe v2 inference request and response bodies in JSON.
//
// Requests: {"id"?, "inputs": [{"name", "datatype", "shape", "data", "parameters"?}], "outputs"?}.
// `data` may be flat or nested (row-major). rankd's ragged convention: flat values with
// "parameters": {"lengths": [...]} (one length per row), or nested lists whose rows differ in
// length (shape [rows, -1]). Every malformed body gives InvalidArgument naming what is wrong;
// nothing is allocated from a declared shape before the data is checked against it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rankd/status.h"
#include "serving/model.h"

namespace rankd {

struct JsonLimits {
  size_t max_body_bytes = size_t{64} << 20;
  int64_t max_elements = int64_t{1} << 26;  // per input
  int max_depth = 8;                        // nesting of `data`
};

StatusOr<InferRequest> ParseInferRequestJson(std::string_view body, const JsonLimits& limits = {});

// {"model_name", "model_version", "id"?, "outputs": [{"name", "datatype", "shape", "data"}]}.
// Floats are written in their shortest exact decimal form.
std::string InferResponseJson(const std::string& model_name, int64_t model_version, const std::string& id,
                              const std::vector<InferOutput>& outputs);

// {"error": "message"}
std::string ErrorJson(const std::string& message);

}  // namespace rankd
