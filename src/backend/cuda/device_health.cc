#include "backend/cuda/device_health.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "backend/cuda/device.h"
#include "backend/cuda/faults.h"
#include "backend/cuda/per_device.h"
#include "common/mutex.h"

namespace rankd::cuda {
namespace {

std::atomic<int64_t> buffered{0};

// A device's first sticky error; `poisoned` is set once `what` holds it.
struct FirstStickyError {
  std::atomic<bool> poisoned{false};
  Mutex mu;
  std::string what RANKD_GUARDED_BY(mu);
};

// By device index; the last entry stands for a call with no current device.
FirstStickyError& First(int device) {
  static FirstStickyError first[kMaxDevices + 1];
  return first[device >= 0 && device < kMaxDevices ? device : kMaxDevices];
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
  if (!IsStickyError(error)) return;
  FirstStickyError& first = First(CurrentDevice());
  if (first.poisoned.load(std::memory_order_relaxed)) return;
  MutexLock lock(first.mu);
  if (first.poisoned.load()) return;
  first.what = std::string(what) + ": " + cudaGetErrorString(error);
  first.poisoned = true;
}

Status DeviceHealth(int device) {
  FirstStickyError& first = First(device);
  if (!first.poisoned.load(std::memory_order_acquire)) {
    if (device == -1 || !First(-1).poisoned.load(std::memory_order_acquire)) return Status::Ok();
    return DeviceHealth(-1);  // an error met with no current device may be any device's
  }
  MutexLock lock(first.mu);
  return Unavailable("GPU " + std::to_string(device) + " met an unrecoverable error (" + first.what +
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

StatusOr<DeviceMemory> QueryDeviceMemory(int device) {
  size_t free = 0, total = 0;
  int current = 0;
  RANKD_CUDA_RETURN(cudaGetDevice(&current));
  RANKD_CUDA_RETURN(cudaSetDevice(device));
  const cudaError_t queried = cudaMemGetInfo(&free, &total);
  RANKD_CUDA_RETURN(cudaSetDevice(current));  // the calling thread's device as it was
  RANKD_CUDA_RETURN(queried);
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
