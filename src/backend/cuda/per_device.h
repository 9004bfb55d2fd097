// PerDevice<T>: a value computed once for each device, for the device current on the calling
// thread. What cudaFuncSetAttribute allows a kernel and a device's attributes hold for one device
// only; a process that runs models on several GPUs needs them set and read on each.
#pragma once

#include <cuda_runtime.h>

#include <mutex>

namespace rankd::cuda {

// Devices a process can use (device indexes 0 to kMaxDevices - 1).
inline constexpr int kMaxDevices = 64;

// The calling thread's current device, or -1 (the error is cleared).
inline int CurrentDevice() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    cudaGetLastError();
    return -1;
  }
  return device;
}

template <typename T>
class PerDevice {
 public:
  // make() for the current device, the first time it is asked for there; every later call on
  // that device returns the same value. Thread-safe. Without a current device, make() each time.
  template <typename Make>
  T Get(Make make) {
    const int device = CurrentDevice();
    if (device < 0) return make();
    Slot& slot = slots_[device];
    std::call_once(slot.once, [&] { slot.value = make(); });
    return slot.value;
  }

 private:
  struct Slot {
    std::once_flag once;
    T value{};
  };
  Slot slots_[kMaxDevices];
};

}  // namespace rankd::cuda
