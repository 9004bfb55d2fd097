// DeviceSpan: the device time between two points of a stream, from a pair of CUDA events created
// on first use (the op profile's "device span of a run", op_profile.h; the timed choice of a
// product's algorithm, gemm.cc).
#pragma once

#include "backend/cuda/device.h"

namespace rankd::cuda {

class DeviceSpan {
 public:
  DeviceSpan() = default;
  DeviceSpan(const DeviceSpan&) = delete;
  DeviceSpan& operator=(const DeviceSpan&) = delete;
  ~DeviceSpan() {
    if (begin_) cudaEventDestroy(begin_);
    if (end_) cudaEventDestroy(end_);
  }

  Status Begin(cudaStream_t stream) {
    if (!begin_) RANKD_RETURN_IF_ERROR(Check(cudaEventCreate(&begin_), "cudaEventCreate"));
    if (!end_) RANKD_RETURN_IF_ERROR(Check(cudaEventCreate(&end_), "cudaEventCreate"));
    return Check(cudaEventRecord(begin_, stream), "cudaEventRecord");
  }
  Status End(cudaStream_t stream) { return Check(cudaEventRecord(end_, stream), "cudaEventRecord"); }
  // Milliseconds from Begin to End, once End is reached on the device (waits for it).
  StatusOr<double> Elapsed() const {
    RANKD_RETURN_IF_ERROR(Check(cudaEventSynchronize(end_), "cudaEventSynchronize"));
    float ms = 0;
    RANKD_RETURN_IF_ERROR(Check(cudaEventElapsedTime(&ms, begin_, end_), "cudaEventElapsedTime"));
    return static_cast<double>(ms);
  }

 private:
  cudaEvent_t begin_ = nullptr, end_ = nullptr;
};

}  // namespace rankd::cuda
