#include "backend/cuda/shared_tables.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/driver_entry.h"
#include "common/mutex.h"

namespace rankd::cuda {
namespace {

struct Mapping {
  void* device = nullptr;  // the address kernels read
  void* copy = nullptr;    // a page-locked copy (HugePageCopy), or null when page-locked in place
  size_t bytes = 0;
  int users = 0;
};

// `bytes` of `from` copied to `to` by up to every core (a thread for each 256 MiB).
void CopyByCores(void* to, const void* from, size_t bytes) {
  const size_t threads = std::clamp<size_t>(bytes >> 28, 1, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> copiers;
  for (size_t t = 0; t < threads; ++t) {
    copiers.emplace_back([=] {
      const size_t begin = bytes / threads * t, end = t + 1 == threads ? bytes : bytes / threads * (t + 1);
      std::memcpy(static_cast<uint8_t*>(to) + begin, static_cast<const uint8_t*>(from) + begin, end - begin);
    });
  }
  for (std::thread& t : copiers) t.join();
}

// `bytes` of `from` copied into anonymous memory in transparent huge pages where the kernel gives
// them (madvise), by every core, then page-locked: a 48 GiB table takes 2.5 s this way on an H200
// host and 21.5 s through cudaHostAlloc's 4 KiB pages (bench/host_reads.cu). The GPU reads it no
// faster or slower (the same bench: random rows read at the same rate from either).
StatusOr<void*> HugePageCopy(const void* from, size_t bytes) {
  void* copy = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (copy == MAP_FAILED) {
    return ResourceExhausted("no host memory for a page-locked copy of a table (" + std::to_string(bytes) + " bytes)");
  }
  (void)madvise(copy, bytes, MADV_HUGEPAGE);  // 4 KiB pages where the kernel has none to give
  CopyByCores(copy, from, bytes);
  if (const cudaError_t e = cudaHostRegister(copy, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
      e != cudaSuccess) {
    munmap(copy, bytes);
    (void)cudaGetLastError();
    return Check(e, ("cudaHostRegister (a table's copy, " + std::to_string(bytes) + " bytes)").c_str());
  }
  return copy;
}

Mutex mu;
std::map<const void*, Mapping>& Mappings() RANKD_REQUIRES(mu) {
  static auto* mappings = new std::map<const void*, Mapping>;  // lives past static destruction
  return *mappings;
}

// The driver's virtual memory management, found through the runtime (driver_entry.h).
struct Vmm {
  decltype(&cuMemGetAllocationGranularity) granularity =
      DriverEntry<decltype(cuMemGetAllocationGranularity)>("cuMemGetAllocationGranularity");
  decltype(&cuMemAddressReserve) reserve = DriverEntry<decltype(cuMemAddressReserve)>("cuMemAddressReserve");
  decltype(&cuMemAddressFree) free = DriverEntry<decltype(cuMemAddressFree)>("cuMemAddressFree");
  decltype(&cuMemCreate) create = DriverEntry<decltype(cuMemCreate)>("cuMemCreate");
  decltype(&cuMemRelease) release = DriverEntry<decltype(cuMemRelease)>("cuMemRelease");
  decltype(&cuMemMap) map = DriverEntry<decltype(cuMemMap)>("cuMemMap");
  decltype(&cuMemUnmap) unmap = DriverEntry<decltype(cuMemUnmap)>("cuMemUnmap");
  decltype(&cuMemSetAccess) set_access = DriverEntry<decltype(cuMemSetAccess)>("cuMemSetAccess");
  bool ok() const { return granularity && reserve && free && create && release && map && unmap && set_access; }
};

const Vmm& TheVmm() {
  static const Vmm vmm;
  return vmm;
}

void FreeCopy(const Mapping& m) {
  cudaHostUnregister(m.copy);
  (void)cudaGetLastError();
  munmap(m.copy, m.bytes);
}

Status Driven(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return Status::Ok();
  return Internal(std::string(what) + " failed (CUDA driver error " + std::to_string(static_cast<int>(r)) + ")");
}
#define RANKD_CU_RETURN(expr) RANKD_RETURN_IF_ERROR(Driven((expr), #expr))

CUmemAllocationProp OnDevice(int gpu) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = gpu;
  return prop;
}

// A table on `gpus`: one address range whose equal parts are each backed by one GPU's memory.
struct GpuCopy {
  CUdeviceptr base = 0;
  size_t reserved = 0, part = 0;
  std::vector<CUmemGenericAllocationHandle> parts;
  std::set<int> readers;  // GPUs granted access
  int users = 0;

  void Free() {
    const Vmm& vmm = TheVmm();
    for (size_t i = 0; i < parts.size(); ++i) {
      vmm.unmap(base + i * part, part);
      vmm.release(parts[i]);
    }
    parts.clear();
    if (base) vmm.free(base, reserved);
    base = 0;
  }

  Status Make(size_t bytes, const std::vector<int>& gpus) {
    const Vmm& vmm = TheVmm();
    if (!vmm.ok()) return Unavailable("this CUDA driver has no virtual memory management (tables on named GPUs)");
    size_t grain = 0;
    for (int gpu : gpus) {
      CUmemAllocationProp prop = OnDevice(gpu);
      size_t g = 0;
      RANKD_CU_RETURN(vmm.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
      grain = std::max(grain, g);
    }
    const size_t n = gpus.size();
    part = (std::max<size_t>((bytes + n - 1) / n, 1) + grain - 1) / grain * grain;
    reserved = part * n;
    RANKD_CU_RETURN(vmm.reserve(&base, reserved, grain, 0, 0));
    for (size_t i = 0; i < n; ++i) {
      CUmemAllocationProp prop = OnDevice(gpus[i]);
      CUmemGenericAllocationHandle handle;
      RANKD_CU_RETURN(vmm.create(&handle, part, &prop, 0));
      parts.push_back(handle);
      RANKD_CU_RETURN(vmm.map(base + i * part, part, 0, handle, 0));
    }
    for (int gpu : gpus) RANKD_RETURN_IF_ERROR(Grant(gpu));
    return Status::Ok();
  }

  Status Grant(int gpu) {
    if (readers.count(gpu)) return Status::Ok();
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = gpu;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    RANKD_CU_RETURN(TheVmm().set_access(base, reserved, &access, 1));
    readers.insert(gpu);
    return Status::Ok();
  }
};

std::map<std::pair<const void*, std::vector<int>>, GpuCopy>& GpuCopies() RANKD_REQUIRES(mu) {
  static auto* copies = new std::map<std::pair<const void*, std::vector<int>>, GpuCopy>;
  return *copies;
}

// Whether kernels on `reader` can read `gpu`'s memory.
Status CheckPeer(int reader, int gpu) {
  if (reader == gpu) return Status::Ok();
  int can = 0;
  RANKD_CUDA_RETURN(cudaDeviceCanAccessPeer(&can, reader, gpu));
  if (!can) {
    return InvalidArgument("GPU " + std::to_string(reader) + " cannot read GPU " + std::to_string(gpu) +
                           "'s memory (no peer access between them)");
  }
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
    RANKD_ASSIGN_OR_RETURN(m.copy, HugePageCopy(at, bytes));
    m.bytes = bytes;
    if (Status got = Check(cudaHostGetDevicePointer(&m.device, m.copy, 0), "cudaHostGetDevicePointer"); !got.ok()) {
      FreeCopy(m);
      return got;
    }
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
    FreeCopy(found->second);
  } else {
    cudaHostUnregister(const_cast<void*>(at));
  }
  Mappings().erase(found);
}

const void* MappedHostBytes(const void* at) {
  MutexLock lock(mu);
  auto found = Mappings().find(at);
  if (found == Mappings().end()) return nullptr;
  return found->second.copy ? found->second.copy : at;
}

StatusOr<void*> MapGpuTable(const void* at, size_t bytes, const std::vector<int>& gpus, int reader) {
  if (gpus.empty()) return InvalidArgument("a table on named GPUs names none");
  for (int gpu : gpus) RANKD_RETURN_IF_ERROR(CheckPeer(reader, gpu));
  MutexLock lock(mu);
  auto found = GpuCopies().find({at, gpus});
  if (found == GpuCopies().end()) {
    GpuCopy copy;
    Status made = copy.Make(bytes, gpus);
    int current = 0;
    if (made.ok()) made = Check(cudaGetDevice(&current), "cudaGetDevice");
    if (made.ok()) made = Check(cudaSetDevice(gpus[0]), "cudaSetDevice (a table's GPU)");
    if (made.ok()) {
      made = Check(cudaMemcpy(reinterpret_cast<void*>(copy.base), at, bytes, cudaMemcpyHostToDevice),
                   "cudaMemcpy (a table to its GPUs)");
      cudaSetDevice(current);
    }
    if (!made.ok()) {
      copy.Free();
      return made;
    }
    found = GpuCopies().emplace(std::pair{at, gpus}, std::move(copy)).first;
  }
  RANKD_RETURN_IF_ERROR(found->second.Grant(reader));
  ++found->second.users;
  return reinterpret_cast<void*>(found->second.base);
}

void UnmapGpuTable(const void* at, const std::vector<int>& gpus) {
  MutexLock lock(mu);
  auto found = GpuCopies().find({at, gpus});
  if (found == GpuCopies().end() || --found->second.users > 0) return;
  found->second.Free();
  GpuCopies().erase(found);
}

}  // namespace rankd::cuda
