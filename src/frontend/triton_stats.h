// Triton's statistics extension: GET /v2/models[/NAME[/versions/V]]/stats and gRPC
// ModelStatistics (docs/serving.md), which perf_analyzer reads for the server's side of a request.
#pragma once

#include <string>

#include "grpc_service.pb.h"
#include "serving/metrics.h"
#include "serving/repository.h"

namespace rankd {

// The statistics of every version `repository` serves now, or of those of `name` (and `version`
// when it is not -1); NotFound for a name or version not served. Counts since the server started:
// inference_count is rows scored, execution_count executions (a merged batch is one);
// inference_stats.success is the requests answered with their end-to-end time, queue,
// compute_input, compute_infer and compute_output the same requests' waits, parsing, scoring and
// answering; fail counts failed requests (their time is not kept: ns 0). batch_stats: executions by
// batch size (rows scored together, a merged batch's rows summed), each with the phases of the
// request that counts it.
StatusOr<inference::ModelStatisticsResponse> TritonStatistics(const ModelRepository& repository, const Metrics& metrics,
                                                              const std::string& name, int64_t version);

}  // namespace rankd
