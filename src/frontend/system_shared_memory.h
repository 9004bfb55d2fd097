// SystemSharedMemory: Triton's system shared memory extension. A client creates a POSIX shared
// memory object (shm_open), registers a range of it under a region name, and then names the
// region, an offset and a byte size in an input's or a requested output's parameters
// (`shared_memory_region`, `shared_memory_offset`, `shared_memory_byte_size`): the input's bytes
// are read from there instead of the request body, the output's bytes written there instead of
// the response.
//
// Registering maps the range into rankd (read and write) and keeps it mapped until it is
// unregistered. A request holds the regions it reads or writes (Use), so unregistering one that a
// request is using unmaps it only when that request is done. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "rankd/request.h"
#include "rankd/status.h"

namespace rankd {

class SystemSharedMemory {
 public:
  struct RegionStatus {
    std::string name, key;
    uint64_t offset = 0, byte_size = 0;
  };
  // A registered range, mapped while any holder keeps it.
  class Region {
   public:
    Region(std::string key, uint64_t offset, uint64_t byte_size, void* mapping, size_t mapped_bytes);
    ~Region();
    Region(const Region&) = delete;
    Region& operator=(const Region&) = delete;
    const std::string& key() const { return key_; }
    uint64_t offset() const { return offset_; }
    uint64_t byte_size() const { return byte_size_; }
    // The registered range's bytes.
    std::span<uint8_t> bytes() const;

   private:
    std::string key_;
    uint64_t offset_, byte_size_;
    void* mapping_;
    size_t mapped_bytes_;
  };

  // Maps [offset, offset + byte_size) of the shared memory object `key` as region `name`. Errors:
  // a name already registered, a range past the object's end or of no bytes (InvalidArgument), no
  // such object (NotFound).
  Status Register(const std::string& name, const std::string& key, uint64_t offset, uint64_t byte_size);
  // Unregisters `name` (NotFound when it is not registered), or every region when `name` is empty.
  Status Unregister(const std::string& name);
  // Every region, or region `name` alone (NotFound when it is not registered).
  StatusOr<std::vector<RegionStatus>> List(const std::string& name) const;
  // `byte_size` bytes at `offset` of region `name`, and the region they lie in (kept mapped while
  // held). Errors name the region: not registered, or a range past its end.
  struct Use {
    std::shared_ptr<Region> region;
    std::span<uint8_t> bytes;
  };
  StatusOr<Use> Find(const std::string& name, uint64_t offset, uint64_t byte_size) const;

 private:
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<Region>> regions_ RANKD_GUARDED_BY(mu_);
};

// A tensor a request placed in a region (its parameters name it): the region's name, and the bytes
// given for it, held mapped from when the request was read until it is answered.
struct SharedMemoryOutput {
  std::string name, region;
  SystemSharedMemory::Use use;
};

// Writes each output `regions` names into the bytes held for it. Errors: an output larger than the
// bytes the request gave for it.
Status WriteSharedMemoryOutputs(const std::vector<InferOutput>& outputs,
                                const std::vector<SharedMemoryOutput>& regions);

}  // namespace rankd
