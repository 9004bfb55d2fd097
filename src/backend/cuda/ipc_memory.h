// Device memory another process exported with cudaIpcGetMemHandle, opened in this one: the CUDA
// backend's Backend::OpenSharedMemory (Triton's CUDA shared memory extension).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace rankd::cuda {

// Opens `handle` (a cudaIpcMemHandle_t's bytes) on `device`, `byte_size` bytes of it. Copies to
// and from it run on a non-blocking stream of its own, so they wait for no executor's work.
// Errors: a handle of the wrong size (InvalidArgument), one the driver refuses (a handle from
// this same process, from another GPU, or of memory already freed).
StatusOr<std::unique_ptr<SharedDeviceMemory>> OpenIpcMemory(int device, const std::string& handle, uint64_t byte_size);

}  // namespace rankd::cuda
