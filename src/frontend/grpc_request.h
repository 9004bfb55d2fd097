// The KServe v2 gRPC ModelInferRequest turned into an InferRequest: typed `contents`,
// `raw_input_contents` or a shared memory region, ragged inputs as flat values with the parameter "lengths" = "3,0,2",
// request parameters `priority` and `timeout`. Every tensor's declared shape is checked against the
// values the message carries (and against `max_elements`) before anything is allocated.
#pragma once

#include <cstdint>
#include <vector>

#include "common/parsed_request.h"
#include "frontend/infer_request_wire.h"
#include "frontend/shared_memory_regions.h"
#include "grpc_service.pb.h"
#include "rankd/status.h"

namespace rankd {

// Inputs whose parameters name a `shared_memory_region` (string_param; `shared_memory_byte_size`
// and `shared_memory_offset` as int64_param or uint64_param) read their bytes from that region of
// `shm` (system_shared_memory.h; null: refused as unimplemented) and have no raw_input_contents
// entry; outputs that name one are appended to `shm_outputs`, checked against their region. Given
// `shm_inputs`, an input whose bytes can be read in place (SharedMemoryRegions::Use::View) is a
// view of them, and its region is appended there: the caller answers only if
// CheckSharedMemoryInputs passes after the request ran. Without it, every input is copied.
StatusOr<ParsedRequest> InferRequestFromProto(const inference::ModelInferRequest& proto, int64_t max_elements,
                                              const SharedMemoryRegions* shm = nullptr,
                                              std::vector<SharedMemoryOutput>* shm_outputs = nullptr,
                                              std::vector<SharedMemoryRegions::Use>* shm_inputs = nullptr);
// The same, the raw_input_contents entries and the typed BYTES inputs' strings read from
// `contents` (the message's own are ignored): what ReadInferRequest (infer_request_wire.h) leaves in
// the wire's slices.
StatusOr<ParsedRequest> InferRequestFromProto(const inference::ModelInferRequest& proto, const WireContents& contents,
                                              int64_t max_elements, const SharedMemoryRegions* shm = nullptr,
                                              std::vector<SharedMemoryOutput>* shm_outputs = nullptr,
                                              std::vector<SharedMemoryRegions::Use>* shm_inputs = nullptr);

}  // namespace rankd
