// What a captured CUDA graph puts on the device: its nodes by type (the kernels that move a run's
// inputs and outputs, mapped_copy.h, counted as the copies they replace), and the most kernels on
// one path of its dependencies (a plan run on lanes, runtime/step_lanes.h, has fewer in a row than
// in all). Executor::CountLaunches reports these for a plan.
#pragma once

#include <cuda_runtime.h>

#include "backend/backend.h"

namespace rankd::cuda {

StatusOr<Executor::Launches> CountGraphLaunches(cudaGraph_t graph);

}  // namespace rankd::cuda
