#include <atomic>

#include "backend/cuda/device.h"
#include "backend/cuda/device_health.h"
#include "backend/cuda/faults.h"

namespace rankd::cuda {
namespace {

std::atomic<int64_t> fail_allocations_over{-1};  // bytes
std::atomic<int64_t> poison_after_runs{-1};
std::atomic<int64_t> poison_device{-1};
std::atomic<bool> poison_simulated{false};
std::atomic<int64_t> runs{0};
std::atomic<int64_t> device_bytes{-1};
std::atomic<int64_t> host_bytes{-1};

__global__ void WriteToInvalidAddress(int* where) { *where = 1; }

}  // namespace

void SetDeviceFaults(const DeviceFaults& faults) {
  fail_allocations_over = faults.fail_allocations_over_mb < 0 ? -1 : faults.fail_allocations_over_mb << 20;
  poison_after_runs = faults.poison_after_runs;
  poison_device = faults.poison_device;
  poison_simulated = faults.poison_simulated > 0;
  runs = 0;
  device_bytes = faults.device_mb < 0 ? -1 : faults.device_mb << 20;
  host_bytes = faults.host_mb < 0 ? -1 : faults.host_mb << 20;
}

bool AllocationFails(size_t bytes) {
  const int64_t over = fail_allocations_over.load(std::memory_order_relaxed);
  return over >= 0 && static_cast<int64_t>(bytes) > over;
}

bool RunPoisons(int device) {
  const int64_t after = poison_after_runs.load(std::memory_order_relaxed);
  if (after < 0) return false;
  const int64_t only = poison_device.load(std::memory_order_relaxed);
  return (only < 0 || only == device) && runs.fetch_add(1, std::memory_order_relaxed) == after;
}

Status LaunchPoisonKernel(cudaStream_t stream) {
  if (poison_simulated.load(std::memory_order_relaxed)) {
    // As a sticky error met here would be: noted against the current device, and this run failed.
    NoteError(cudaErrorIllegalAddress, "the injected device failure");
    return Internal(
        "the injected device failure: an illegal memory access was encountered (the GPU is unusable "
        "until the server restarts)");
  }
  // An address in the first page, which no allocation holds.
  WriteToInvalidAddress<<<1, 1, 0, stream>>>(reinterpret_cast<int*>(uintptr_t{64}));
  return Check(cudaGetLastError(), "the injected faulting kernel");
}

int64_t InjectedDeviceBytes() { return device_bytes.load(std::memory_order_relaxed); }

int64_t InjectedHostBytes() { return host_bytes.load(std::memory_order_relaxed); }

}  // namespace rankd::cuda
