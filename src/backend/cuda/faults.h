// Fault injection for the CUDA backend's failure paths, set by `--cuda fault_*=N` in builds
// configured with RANKD_FAULT_INJECTION (the test build; ParseCudaOption refuses the keys
// elsewhere). Each fault is off (-1) by default; checking one is a relaxed atomic load.
//   fail_allocations_over_mb  a DeviceBuffer reservation of more than this many MB fails as out of
//                             device memory (a large merged batch's workspace, a capture's buffers)
//   poison_after_runs         the executor run after this many launches a kernel that writes to an
//                             invalid address first: a real sticky error that poisons the context
//   poison_device             with poison_after_runs, only runs on this GPU count and poison (one
//                             replica of a replicated model failing while the others serve)
//   poison_simulated          1: the poisoning run launches nothing: it fails as a sticky error
//                             would and notes one against its GPU alone. A real sticky error on one
//                             GPU poisoned every GPU of the process on the two-H200 host measured
//                             (docs/replicas.md), so one replica's failure is tested so.
//   device_mb                 the device seems to have this many MB, less what DeviceBuffers hold
//                             (a load that does not fit beside the serving models)
//   host_mb                   the host seems to have this many MB available (a load whose
//                             host-memory tables do not fit)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "rankd/status.h"

namespace rankd::cuda {

struct DeviceFaults {
  int64_t fail_allocations_over_mb = -1;
  int64_t poison_after_runs = -1;
  int64_t poison_device = -1;
  int64_t poison_simulated = -1;
  int64_t device_mb = -1;
  int64_t host_mb = -1;
};

void SetDeviceFaults(const DeviceFaults& faults);
// Whether a reservation of `bytes` is to fail (fail_allocations_over_mb).
bool AllocationFails(size_t bytes);
// Counts a run on `device`; true for the one that is to poison its context (poison_after_runs,
// poison_device).
bool RunPoisons(int device);
// Launches on `stream` a kernel that writes to an invalid device address.
Status LaunchPoisonKernel(cudaStream_t stream);
// The injected device size in bytes, or -1.
int64_t InjectedDeviceBytes();
// The injected available host memory in bytes, or -1.
int64_t InjectedHostBytes();

}  // namespace rankd::cuda
