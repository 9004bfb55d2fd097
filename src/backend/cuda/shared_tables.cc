#include "backend/cuda/shared_tables.h"

#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "backend/cuda/device.h"
#include "common/mutex.h"

namespace rankd::cuda {
namespace {

struct Mapping {
  void* device = nullptr;  // the address kernels read
  void* copy = nullptr;    // cudaHostAlloc'ed copy, or null when page-locked in place
  int users = 0;
};

Mutex mu;
std::map<const void*, Mapping>& Mappings() RANKD_REQUIRES(mu) {
  static auto* mappings = new std::map<const void*, Mapping>;  // lives past static destruction
  return *mappings;
}

struct GpuCopy {
  void* device = nullptr;
  int users = 0;
};
std::map<std::pair<const void*, int>, GpuCopy>& GpuCopies() RANKD_REQUIRES(mu) {
  static auto* copies = new std::map<std::pair<const void*, int>, GpuCopy>;
  return *copies;
}

// Lets kernels on `reader` read `gpu`'s memory, once per pair for the process.
Status EnablePeerAccess(int reader, int gpu) RANKD_REQUIRES(mu) {
  static auto* enabled = new std::set<std::pair<int, int>>;
  if (reader == gpu || enabled->count({reader, gpu})) return Status::Ok();
  int can = 0;
  RANKD_CUDA_RETURN(cudaDeviceCanAccessPeer(&can, reader, gpu));
  if (!can) {
    return InvalidArgument("GPU " + std::to_string(reader) + " cannot read GPU " + std::to_string(gpu) +
                           "'s memory (no peer access between them)");
  }
  RANKD_CUDA_RETURN(cudaSetDevice(reader));
  cudaError_t e = cudaDeviceEnablePeerAccess(gpu, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();
  } else {
    RANKD_CUDA_RETURN(e);
  }
  enabled->insert({reader, gpu});
  return Status::Ok();
}

}  // namespace

StatusOr<void*> MapHostTable(const void* at, size_t bytes, bool copy) {
  MutexLock lock(mu);
  auto found = Mappings().find(at);
  if (found != Mappings().end()) {
    ++found->second.users;
    return found->second.device;
  }
  Mapping m;
  void* host = const_cast<void*>(at);
  if (!copy && cudaHostRegister(host, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable) == cudaSuccess) {
    RANKD_CUDA_RETURN(cudaHostGetDevicePointer(&m.device, host, 0));
  } else {
    (void)cudaGetLastError();  // not sticky: clear it so that no later check reports it
    RANKD_CUDA_RETURN(cudaHostAlloc(&m.copy, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    std::memcpy(m.copy, at, bytes);
    RANKD_CUDA_RETURN(cudaHostGetDevicePointer(&m.device, m.copy, 0));
  }
  m.users = 1;
  Mappings()[at] = m;
  return m.device;
}

void UnmapHostTable(const void* at) {
  MutexLock lock(mu);
  auto found = Mappings().find(at);
  if (found == Mappings().end() || --found->second.users > 0) return;
  if (found->second.copy) {
    cudaFreeHost(found->second.copy);
  } else {
    cudaHostUnregister(const_cast<void*>(at));
  }
  Mappings().erase(found);
}

StatusOr<void*> MapGpuTable(const void* at, size_t bytes, int gpu, int reader) {
  MutexLock lock(mu);
  int current = 0;
  RANKD_CUDA_RETURN(cudaGetDevice(&current));
  Status peer = EnablePeerAccess(reader, gpu);
  auto found = GpuCopies().find({at, gpu});
  if (peer.ok() && found == GpuCopies().end()) {
    GpuCopy copy;
    peer = Check(cudaSetDevice(gpu), "cudaSetDevice (a table's GPU)");
    if (peer.ok()) peer = Check(cudaMalloc(&copy.device, bytes), "cudaMalloc (a table on its GPU)");
    if (peer.ok()) peer = Check(cudaMemcpy(copy.device, at, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (a table)");
    if (!peer.ok() && copy.device) cudaFree(copy.device);
    if (peer.ok()) found = GpuCopies().emplace(std::pair{at, gpu}, copy).first;
  }
  RANKD_CUDA_RETURN(cudaSetDevice(current));
  RANKD_RETURN_IF_ERROR(peer);
  ++found->second.users;
  return found->second.device;
}

void UnmapGpuTable(const void* at, int gpu) {
  MutexLock lock(mu);
  auto found = GpuCopies().find({at, gpu});
  if (found == GpuCopies().end() || --found->second.users > 0) return;
  cudaFree(found->second.device);
  GpuCopies().erase(found);
}

}  // namespace rankd::cuda
