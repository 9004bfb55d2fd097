// DeviceSpan: the device time between two points of a stream, from a pair of CUDA events created
// on first use (RANKD_PROFILE's "device span of a run"; op_profile.h).
#pragma once

#include <cuda_runtime.h>

#include "rankd/status.h"

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
    if (!begin_ && cudaEventCreate(&begin_) != cudaSuccess) return Internal("cudaEventCreate failed");
    if (!end_ && cudaEventCreate(&end_) != cudaSuccess) return Internal("cudaEventCreate failed");
    return Recorded(cudaEventRecord(begin_, stream));
  }
  Status End(cudaStream_t stream) { return Recorded(cudaEventRecord(end_, stream)); }
  // Milliseconds from Begin to End; both must have completed (the stream synchronised).
  StatusOr<double> Elapsed() const {
    float ms = 0;
    cudaError_t e = cudaEventElapsedTime(&ms, begin_, end_);
    if (e != cudaSuccess) return Internal(std::string("cudaEventElapsedTime: ") + cudaGetErrorString(e));
    return static_cast<double>(ms);
  }

 private:
  static Status Recorded(cudaError_t e) {
    if (e == cudaSuccess) return Status::Ok();
    return Internal(std::string("cudaEventRecord: ") + cudaGetErrorString(e));
  }

  cudaEvent_t begin_ = nullptr, end_ = nullptr;
};

}  // namespace rankd::cuda
