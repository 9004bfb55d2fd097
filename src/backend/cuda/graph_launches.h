// What a captured CUDA graph puts on the device: its nodes by type, and the most kernels on one
// path of its dependencies (a plan run on lanes, runtime/step_lanes.h, has fewer in a row than in
// all). Executor::CountLaunches reports these for a plan.
#pragma once

#include <cuda_runtime.h>

#include "backend/backend.h"

namespace rankd::cuda {

StatusOr<Executor::Launches> CountGraphLaunches(cudaGraph_t graph);

}  // namespace rankd::cuda
