// What a captured CUDA graph puts on the device: its nodes by type, and the most kernels on one
// path of its dependencies (a plan run on lanes, runtime/step_lanes.h, has fewer in a row than in
// all). Executor::CountLaunches reports these for a plan.
#pragma once

#include <cuda_runtime.h>

#include <span>

#include "runtime/executor.h"

namespace rankd::cuda {

// `copies`: kernel nodes counted as the copies they replace (copies by kernel, mapped_copy.h).
StatusOr<Executor::Launches> CountGraphLaunches(cudaGraph_t graph, std::span<const cudaGraphNode_t> copies = {});

}  // namespace rankd::cuda
