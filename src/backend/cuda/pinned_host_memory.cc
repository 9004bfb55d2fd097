#include "backend/cuda/pinned_host_memory.h"

#include <cuda_runtime.h>

#include <string>

#include "backend/cuda/device.h"

namespace rankd::cuda {
namespace {

class RegisteredRange final : public PinnedHostMemory {
 public:
  explicit RegisteredRange(void* data) : data_(data) {}
  ~RegisteredRange() override {
    cudaHostUnregister(data_);
    (void)cudaGetLastError();  // not sticky: leave nothing for a later check to report
  }

 private:
  void* data_;
};

}  // namespace

StatusOr<std::unique_ptr<PinnedHostMemory>> PinHostMemory(int device, void* data, size_t bytes) {
  RANKD_CUDA_RETURN(cudaSetDevice(device));
  if (const cudaError_t e = cudaHostRegister(data, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped);
      e != cudaSuccess) {
    (void)cudaGetLastError();
    return Check(e, ("cudaHostRegister (" + std::to_string(bytes) + " bytes)").c_str());
  }
  auto range = std::make_unique<RegisteredRange>(data);
  void* on_device = nullptr;
  RANKD_CUDA_RETURN(cudaHostGetDevicePointer(&on_device, data, 0));
  if (on_device != data) {
    return Unimplemented("GPU " + std::to_string(device) +
                         " reads page-locked host memory at another address than the host's");
  }
  return std::unique_ptr<PinnedHostMemory>(std::move(range));
}

}  // namespace rankd::cuda
