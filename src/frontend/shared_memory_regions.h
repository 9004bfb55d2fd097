// SharedMemoryRegions: Triton's system and CUDA shared memory extensions. A client creates a POSIX
// shared memory object (shm_open) and registers a range of it under a region name, or exports device
// memory with cudaIpcGetMemHandle and registers the handle; it then names the
// region, an offset and a byte size in an input's or a requested output's parameters
// (`shared_memory_region`, `shared_memory_offset`, `shared_memory_byte_size`): the input's bytes
// are read from there instead of the request body (in place, by a tensor located in shared memory,
// where they are 64-byte aligned with room after them; else copied), the output's bytes written
// there instead of the response.
//
// Registering maps the range into rankd (read and write), or opens the device memory, and keeps it
// so until it is unregistered; a CUDA region's bytes are copied to and from the host on a stream of
// its own. A server on GPUs also page-locks each system region for them (SetPinning), so that a GPU
// reads the inputs lying in it in place, as it reads request tensors from its pinned pool. A request holds the regions
// it reads or writes (Use), so unregistering one that a request is using unmaps it only when that request is done.
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/mutex.h"
#include "rankd/request.h"
#include "rankd/status.h"

namespace rankd {

class SharedMemoryRegions {
 public:
  SharedMemoryRegions();
  enum class Kind { kSystem, kCuda };
  struct RegionStatus {
    std::string name, key;  // key: the system region's shared memory object
    uint64_t offset = 0, byte_size = 0;
    int device_id = 0;  // a CUDA region's device
  };
  // A registered region: its bytes read and written by copies (a system region's are mapped here,
  // a CUDA region's are on its device). Open while any holder keeps it.
  class Region {
   public:
    virtual ~Region() = default;
    virtual Kind kind() const = 0;
    virtual RegionStatus status(const std::string& name) const = 0;
    virtual uint64_t byte_size() const = 0;
    // Copies `bytes` bytes at `at` (within byte_size(), checked by the caller) to `dst` / from `src`.
    virtual Status Read(uint64_t at, void* dst, size_t bytes) const = 0;
    virtual Status Write(uint64_t at, const void* src, size_t bytes) const = 0;
    // Whether its reads cost a wait each (a CUDA region's copies), so that a request's are better
    // made together (SharedMemoryReads).
    virtual bool reads_wait() const { return false; }
    // Copies each piece (SharedDeviceMemory::Piece: `bytes` at `offset` to `dst`), one wait for all.
    virtual Status ReadMany(std::span<const SharedDeviceMemory::Piece> pieces) const {
      for (const auto& p : pieces) RANKD_RETURN_IF_ERROR(Read(p.offset, p.dst, p.bytes));
      return Status::Ok();
    }
    // The address of the `bytes` bytes at `at`, where this process reads them in place as it reads
    // a tensor it allocated (64-byte aligned, with 64 mapped bytes after them); nullptr where they
    // must be copied (a CUDA region's, or bytes not so placed).
    virtual void* InPlace(uint64_t at, uint64_t bytes) const {
      (void)at, (void)bytes;
      return nullptr;
    }
    // OK unless what was read in place may have changed under the reader (an object truncated
    // after it was registered, which a GPU reading page-locked pages would not notice): then the
    // error to answer with.
    virtual Status Check() const { return Status::Ok(); }
    // Whether its bytes are page-locked for the GPUs (SetPinning).
    virtual bool page_locked() const { return false; }
  };

  // A server on GPUs: from now on, system regions are page-locked through `backend`
  // (Backend::PinHostMemory) as they are registered, `limit_bytes` for all of them at once (their
  // ranges rounded out to pages), and a view of such a region's bytes is located kPinned. Inputs in
  // a region left unlocked (a limit of 0, the driver's refusal) are copied into request tensors, not
  // viewed: the executor would pack a view into its staging buffer on helper threads that spin
  // between runs (served W1 took twice the CPU per request so). Without it (a server on the host),
  // regions are mapped only and views located in shared memory.
  void SetPinning(const Backend* backend, uint64_t limit_bytes);
  // Bytes of the registered system regions page-locked now (a region unregistered while a request
  // uses it counts until that request is done).
  uint64_t pinned_bytes() const;

  // Maps [offset, offset + byte_size) of the shared memory object `key` as region `name`, and
  // page-locks it where SetPinning asks (where the driver refuses, the region is registered
  // unlocked, with a warning). Errors: a name already registered (of either kind), a range past the
  // object's end or of no bytes (InvalidArgument), no such object (NotFound), a region that would
  // take the page-locked bytes past SetPinning's limit (ResourceExhausted).
  Status Register(const std::string& name, const std::string& key, uint64_t offset, uint64_t byte_size);
  // Opens device memory another process exported with cudaIpcGetMemHandle (`raw_handle`: the
  // handle's bytes) on GPU `device_id`, `byte_size` bytes, as region `name` (Triton's CUDA shared
  // memory). Errors: a name already registered, a handle of the wrong size, no such GPU or no CUDA
  // backend in this build (Unavailable), a handle the driver refuses.
  Status RegisterCuda(const std::string& name, const std::string& raw_handle, int64_t device_id, uint64_t byte_size);
  // Unregisters region `name` of `kind` (NotFound when there is none), or every region of `kind`
  // when `name` is empty.
  Status Unregister(Kind kind, const std::string& name);
  // Every region of `kind`, or region `name` alone (NotFound when it is not one of `kind`).
  StatusOr<std::vector<RegionStatus>> List(Kind kind, const std::string& name) const;
  // `byte_size` bytes at `offset` of region `name` (of either kind), and the region they lie in
  // (kept open while held). Errors name the region: not registered, or a range past its end.
  struct Use {
    std::shared_ptr<const Region> region;
    uint64_t offset = 0, size = 0;
    Status Read(void* dst) const { return region->Read(offset, dst, static_cast<size_t>(size)); }
    Status Write(const void* src, size_t bytes) const { return region->Write(offset, src, bytes); }
    // A tensor of `dtype` and `shape` (of `size` bytes) viewing the bytes in place, located in
    // shared memory (pinned, where the region is page-locked) and keeping the region open while it
    // lives; undefined where they must be read (Region::InPlace). A request that reads one is
    // answered only if Check() is then OK.
    Tensor View(DType dtype, Shape shape) const;
  };
  StatusOr<Use> Find(const std::string& name, uint64_t offset, uint64_t byte_size) const;

 private:
  Status Add(const std::string& name, std::shared_ptr<const Region> region);
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<const Region>> regions_ RANKD_GUARDED_BY(mu_);
  bool gpus_ RANKD_GUARDED_BY(mu_) = false;  // SetPinning was called
  const Backend* pin_backend_ RANKD_GUARDED_BY(mu_) = nullptr;
  uint64_t pin_limit_ RANKD_GUARDED_BY(mu_) = 0;
  // Page-locked bytes of the regions alive, shared with them: a region gives its bytes back when it
  // closes, which may be after it was unregistered.
  std::shared_ptr<std::atomic<uint64_t>> pinned_bytes_;
};

// The reads of one request's inputs out of regions, made as the request is parsed: a system
// region's at once (a copy in memory), a CUDA region's put off until Finish, which makes them
// together, so that a request whose inputs lie in device memory waits once a region, not once an
// input (W1 has 27, or 53 with its lengths as tensors). Not thread-safe: one request's parser.
class SharedMemoryReads {
 public:
  // Copies `use`'s bytes to `dst`, now or at Finish; nothing may read `dst` before Finish, and it
  // must live until then.
  Status Read(const SharedMemoryRegions::Use& use, void* dst);
  // Makes the reads put off. Errors: the first a region gives.
  Status Finish();

 private:
  struct Pending {
    std::shared_ptr<const SharedMemoryRegions::Region> region;  // open until Finish
    SharedDeviceMemory::Piece piece;
  };
  std::vector<Pending> pending_;
};

// A tensor a request placed in a region (its parameters name it): the region's name, and the bytes
// given for it, held mapped from when the request was read until it is answered.
struct SharedMemoryOutput {
  std::string name, region;
  SharedMemoryRegions::Use use;
};

// OK unless a region some of `inputs` were read from in place was truncated meanwhile (the request
// then read zeros instead: its answer is that error).
Status CheckSharedMemoryInputs(const std::vector<SharedMemoryRegions::Use>& inputs);

// Writes each output `regions` names into the bytes held for it. Errors: an output larger than the
// bytes the request gave for it.
Status WriteSharedMemoryOutputs(const std::vector<InferOutput>& outputs,
                                const std::vector<SharedMemoryOutput>& regions);

}  // namespace rankd
