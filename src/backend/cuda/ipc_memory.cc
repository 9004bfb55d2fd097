#include "backend/cuda/ipc_memory.h"

#include <cuda_runtime.h>

#include <cstring>
#include <mutex>
#include <span>

#include "backend/cuda/device.h"

namespace rankd::cuda {
namespace {

class IpcMemory final : public SharedDeviceMemory {
 public:
  IpcMemory(int device, void* base, cudaStream_t stream, uint64_t byte_size)
      : device_(device), base_(static_cast<char*>(base)), stream_(stream), byte_size_(byte_size) {}
  ~IpcMemory() override {
    if (cudaSetDevice(device_) == cudaSuccess) {
      cudaStreamDestroy(stream_);
      cudaIpcCloseMemHandle(base_);
    }
    cudaGetLastError();
  }
  uint64_t byte_size() const override { return byte_size_; }
  Status Read(uint64_t offset, void* dst, size_t bytes) const override {
    return Copy(dst, base_ + offset, bytes, cudaMemcpyDeviceToHost);
  }
  Status Write(uint64_t offset, const void* src, size_t bytes) const override {
    return Copy(base_ + offset, src, bytes, cudaMemcpyHostToDevice);
  }
  Status ReadMany(std::span<const Piece> pieces) const override {
    std::lock_guard<std::mutex> lock(mu_);
    RANKD_CUDA_RETURN(cudaSetDevice(device_));
    cudaError_t started = cudaSuccess;
    for (const Piece& p : pieces) {
      if (p.bytes == 0) continue;
      started = cudaMemcpyAsync(p.dst, base_ + p.offset, p.bytes, cudaMemcpyDeviceToHost, stream_);
      if (started != cudaSuccess) break;
    }
    // Waited for even when one failed to start: those started write into the caller's memory.
    const cudaError_t done = cudaStreamSynchronize(stream_);
    RANKD_CUDA_RETURN(started);
    RANKD_CUDA_RETURN(done);
    return Status::Ok();
  }

 private:
  Status Copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) const {
    if (bytes == 0) return Status::Ok();
    std::lock_guard<std::mutex> lock(mu_);  // one copy at a time on the region's stream
    RANKD_CUDA_RETURN(cudaSetDevice(device_));
    RANKD_CUDA_RETURN(cudaMemcpyAsync(dst, src, bytes, kind, stream_));
    RANKD_CUDA_RETURN(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }
  int device_;
  char* base_;
  cudaStream_t stream_;
  uint64_t byte_size_;
  mutable std::mutex mu_;
};

}  // namespace

StatusOr<std::unique_ptr<SharedDeviceMemory>> OpenIpcMemory(int device, const std::string& handle, uint64_t byte_size) {
  cudaIpcMemHandle_t h;
  if (handle.size() != sizeof(h)) {
    return InvalidArgument("raw_handle has " + std::to_string(handle.size()) + " bytes; a CUDA IPC handle has " +
                           std::to_string(sizeof(h)));
  }
  std::memcpy(&h, handle.data(), sizeof(h));
  RANKD_CUDA_RETURN(cudaSetDevice(device));
  void* base = nullptr;
  cudaError_t e = cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky: the handle is bad, not the device
    return InvalidArgument(std::string("the CUDA driver cannot open raw_handle: ") + cudaGetErrorString(e));
  }
  cudaStream_t stream = nullptr;
  e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    cudaIpcCloseMemHandle(base);
    cudaGetLastError();
    return Unavailable(std::string("cannot create a stream: ") + cudaGetErrorString(e));
  }
  return std::unique_ptr<SharedDeviceMemory>(std::make_unique<IpcMemory>(device, base, stream, byte_size));
}

}  // namespace rankd::cuda
