#include "backend/cuda/device_health.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "backend/cuda/device.h"
#include "backend/cuda/faults.h"
#include "common/mutex.h"

namespace rankd::cuda {
namespace {

std::atomic<bool> poisoned{false};
std::atomic<int64_t> buffered{0};

struct FirstStickyError {
  Mutex mu;
  std::string what RANKD_GUARDED_BY(mu);
};

FirstStickyError& First() {
  static FirstStickyError first;
  return first;
}

}  // namespace

bool IsStickyError(cudaError_t error) {
  switch (error) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
      return true;
    default:
      return false;
  }
}

void NoteError(cudaError_t error, const char* what) {
  if (!IsStickyError(error) || poisoned.load(std::memory_order_relaxed)) return;
  FirstStickyError& first = First();
  MutexLock lock(first.mu);
  if (poisoned.load()) return;
  first.what = std::string(what) + ": " + cudaGetErrorString(error);
  poisoned = true;
}

Status DeviceHealth() {
  if (!poisoned.load(std::memory_order_acquire)) return Status::Ok();
  FirstStickyError& first = First();
  MutexLock lock(first.mu);
  return Unavailable("the GPU met an unrecoverable error (" + first.what +
                     "); nothing more runs on it until the server restarts");
}

Status Check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::Ok();
  if (error == cudaErrorMemoryAllocation) return Unavailable(std::string(what) + ": out of device memory");
  NoteError(error, what);
  std::string message = std::string(what) + ": " + cudaGetErrorString(error);
  if (IsStickyError(error)) message += " (the GPU is unusable until the server restarts)";
  return Internal(std::move(message));
}

Status Launched(const KernelArgs& k) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return Status::Ok();
  NoteError(e, "a kernel launch");
  return Internal(k.node.Describe() + ": kernel launch failed: " + cudaGetErrorString(e));
}

StatusOr<DeviceMemory> QueryDeviceMemory() {
  size_t free = 0, total = 0;
  RANKD_CUDA_RETURN(cudaMemGetInfo(&free, &total));
  DeviceMemory m{static_cast<int64_t>(free), static_cast<int64_t>(total)};
  if (int64_t injected = InjectedDeviceBytes(); injected >= 0) {
    m.total = std::min(m.total, injected);
    m.free = std::clamp<int64_t>(injected - BufferedDeviceBytes(), 0, m.free);
  }
  return m;
}

int64_t BufferedDeviceBytes() { return buffered.load(std::memory_order_relaxed); }

void CountBufferedDeviceBytes(int64_t delta) { buffered.fetch_add(delta, std::memory_order_relaxed); }

}  // namespace rankd::cuda
