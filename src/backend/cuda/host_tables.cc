#include "backend/cuda/host_tables.h"

#include <cuda_runtime.h>

#include <cstring>
#include <map>

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

}  // namespace rankd::cuda
