// Whether the device can still run work, and how much memory it has room for.
//
// Some CUDA errors are sticky: after an illegal address, a trap or an uncorrectable ECC error the
// device's context is unusable and every later call on it fails the same way until the process
// restarts. Check (device.h) notes such an error here, for the calling thread's current device, the
// first time any call returns it; from then on that device's backend (cuda_backend.h) reports
// itself unhealthy (Backend::Health), models refuse requests at once, and the server's
// readiness and liveness probes fail so that an orchestrator restarts it (docs/serving.md).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "rankd/status.h"

namespace rankd::cuda {

// Whether `error` leaves the context unusable until the process restarts.
bool IsStickyError(cudaError_t error);
// Notes `error` (from the call `what`) if it is sticky, against the current device; the first one
// noted is kept.
void NoteError(cudaError_t error, const char* what);
// OK while no sticky error was noted on `device`; else Unavailable naming the first one.
Status DeviceHealth(int device);

// The device's memory as a load sees it: what is free and the total (faults.h's device_mb
// shrinks both in a fault-injection build).
struct DeviceMemory {
  int64_t free = 0;
  int64_t total = 0;
};
StatusOr<DeviceMemory> QueryDeviceMemory(int device);
// Bytes this process holds in DeviceBuffers now (weights, workspaces, staging).
int64_t BufferedDeviceBytes();
void CountBufferedDeviceBytes(int64_t delta);

}  // namespace rankd::cuda
