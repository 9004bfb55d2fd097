// Kernels generated at load time: CUDA source compiled with NVRTC for the current device, loaded
// as a library, cached for the life of the process by a hash of the source and the device's
// architecture (a second load of the same source costs a lookup). With RANKD_KERNEL_CACHE_DIR
// set, compiled code is also kept there as <hash>.cubin (with its size and a checksum) and reused
// by later processes; a file that does not check out is compiled afresh.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "rankd/status.h"

namespace rankd::cuda {

// The kernel `name` (declared extern "C") of `source`, compiled for the current device. Errors
// carry NVRTC's log. Thread-safe; takes the capture gate while it loads code.
StatusOr<cudaKernel_t> CompileKernel(const std::string& source, const std::string& name);

// For tests: the next CompileKernel of any source looks at the disk cache again (what was loaded
// stays loaded).
void ForgetLoadedKernels();

// How many compilations the process ran, and how many came from the disk cache (for tests).
struct CompileCounts {
  int compiled = 0, from_disk = 0;
};
CompileCounts RuntimeCompileCounts();

}  // namespace rankd::cuda
