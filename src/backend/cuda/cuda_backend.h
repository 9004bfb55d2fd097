// The CUDA backend: every op of the CPU backend on a GPU (a backend per device), weights resident on the device,
// executors with their own stream, workspace and cuBLASLt state. Docs: docs/cuda.md.
#pragma once

#include <string>

#include "backend/backend.h"

namespace rankd {

// Every kernel of the CUDA backend, by op (no device needed: the tests check each has a case).
KernelTable CudaKernels();

// The CUDA backend of device `device` (one per device, for the life of the process), or nullptr
// with `why` filled when there is no such device (or no usable device at all).
const Backend* CudaBackendOn(int device, std::string* why);

}  // namespace rankd
