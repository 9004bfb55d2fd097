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

#include "common/parsed_request.h"
#include "frontend/binary_pieces.h"
#include "frontend/shared_memory_regions.h"
#include "rankd/request.h"
#include "rankd/status.h"

namespace rankd {

struct JsonLimits {
  size_t max_body_bytes = size_t{64} << 20;
  int64_t max_elements = int64_t{1} << 26;  // per input
  int max_depth = 8;                        // nesting of `data`
};

StatusOr<InferRequest> ParseInferRequestJson(std::string_view body, const JsonLimits& limits = {});

// A request in the binary tensor data extension: `json` is the JSON header (the body's first
// Inference-Header-Content-Length bytes), `binary` the rest. Inputs whose parameters carry
// binary_data_size take that many raw little-endian bytes from `binary`, in input order.
// Inputs whose parameters name a shared_memory_region read their bytes from `shm`
// (system_shared_memory.h; null: refused as unimplemented): in place where they can be (a view,
// its region listed in shared_memory_inputs: answer only if CheckSharedMemoryInputs then passes),
// else copied. Outputs that name one are listed to be written there (WriteSharedMemoryOutputs).
struct ParsedInferRequest : ParsedRequest {               // the request, its lengths summed (common/parsed_request.h)
  bool binary_output_all = false;                         // parameters.binary_data_output
  std::vector<std::string> binary_outputs;                // outputs whose parameters.binary_data is true
  std::vector<SharedMemoryOutput> shared_memory_outputs;  // outputs whose parameters name a region
  std::vector<SharedMemoryRegions::Use> shared_memory_inputs;  // regions inputs are read from in place
};
StatusOr<ParsedInferRequest> ParseInferRequest(std::string_view json, std::string_view binary,
                                               const JsonLimits& limits = {}, const SharedMemoryRegions* shm = nullptr);
// The same with the binary part in pieces (binary_pieces.h): an input whose bytes one piece of a
// request tensor holds from a 64-byte boundary is a view of them, not a copy.
StatusOr<ParsedInferRequest> ParseInferRequest(std::string_view json, const BinaryPieces& binary,
                                               const JsonLimits& limits = {}, const SharedMemoryRegions* shm = nullptr);

// A response body; with binary outputs, the first `json_length` bytes are the JSON header and
// the raw output tensors follow (the HTTP layer sets Inference-Header-Content-Length).
struct InferResponseBody {
  std::string body;
  size_t json_length = 0;
  bool binary = false;
};
// Outputs `regions` names are described (their region and byte size as parameters), not carried.
InferResponseBody MakeInferResponse(const std::string& model_name, int64_t model_version, const std::string& id,
                                    const std::vector<InferOutput>& outputs, bool binary_all,
                                    const std::vector<std::string>& binary_outputs,
                                    const std::vector<SharedMemoryOutput>& regions = {});

// {"model_name", "model_version", "id"?, "outputs": [{"name", "datatype", "shape", "data"}]}.
// Floats are written in their shortest exact decimal form.
std::string InferResponseJson(const std::string& model_name, int64_t model_version, const std::string& id,
                              const std::vector<InferOutput>& outputs);

// `text` as a JSON string, quotes included; bytes that are not UTF-8 are replaced, never thrown on.
std::string JsonQuoted(std::string_view text);

// {"error": "message"}
std::string ErrorJson(const std::string& message);

}  // namespace rankd
