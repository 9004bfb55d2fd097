// The KServe v2 gRPC ModelInferRequest turned into an InferRequest: typed `contents`
// or `raw_input_contents`, ragged inputs as flat values with the parameter "lengths" = "3,0,2",
// request parameters `priority` and `timeout`. Every tensor's declared shape is checked against the
// values the message carries (and against `max_elements`) before anything is allocated.
#pragma once

#include <cstdint>

#include "common/parsed_request.h"
#include "grpc_service.pb.h"
#include "rankd/status.h"

namespace rankd {

StatusOr<ParsedRequest> InferRequestFromProto(const inference::ModelInferRequest& proto, int64_t max_elements);

}  // namespace rankd
