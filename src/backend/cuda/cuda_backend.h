// The CUDA backend: every op of the CPU backend on one GPU, weights resident on the device,
// executors with their own stream, workspace and cuBLASLt state. Docs: docs/cuda.md.
#pragma once

#include <string>

#include "backend/backend.h"

namespace rankd {

// Every kernel of the CUDA backend, by op (no device needed: the tests check each has a case).
KernelTable CudaKernels();

// The process-wide CUDA backend, or nullptr with `why` filled when no usable device is present.
const Backend* CudaBackendIfAvailable(std::string* why);

}  // namespace rankd
