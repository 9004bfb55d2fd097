#include "frontend/system_shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rankd {

SystemSharedMemory::Region::Region(std::string key, uint64_t offset, uint64_t byte_size, void* mapping,
                                   size_t mapped_bytes)
    : key_(std::move(key)), offset_(offset), byte_size_(byte_size), mapping_(mapping), mapped_bytes_(mapped_bytes) {}

SystemSharedMemory::Region::~Region() { munmap(mapping_, mapped_bytes_); }

std::span<uint8_t> SystemSharedMemory::Region::bytes() const {
  return {static_cast<uint8_t*>(mapping_) + offset_, static_cast<size_t>(byte_size_)};
}

Status SystemSharedMemory::Register(const std::string& name, const std::string& key, uint64_t offset,
                                    uint64_t byte_size) {
  const std::string what = "shared memory region '" + name + "'";
  if (name.empty()) return InvalidArgument("a shared memory region needs a name");
  if (byte_size == 0) return InvalidArgument(what + ": byte_size must be at least 1");
  {
    MutexLock lock(mu_);
    if (regions_.count(name)) return InvalidArgument(what + " is already registered");
  }
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  if (fd < 0) {
    return NotFound(what + ": cannot open shared memory object '" + key + "': " + std::strerror(errno));
  }
  struct stat st {};
  const bool sized = fstat(fd, &st) == 0;
  const uint64_t size = sized ? static_cast<uint64_t>(st.st_size) : 0;
  if (!sized || offset > size || byte_size > size - offset) {
    close(fd);
    return InvalidArgument(what + ": offset " + std::to_string(offset) + " and byte_size " + std::to_string(byte_size) +
                           " reach past the " + std::to_string(size) + " bytes of '" + key + "'");
  }
  const size_t mapped = static_cast<size_t>(offset + byte_size);
  void* mapping = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mapping == MAP_FAILED) return InvalidArgument(what + ": cannot map '" + key + "': " + std::strerror(errno));
  auto region = std::make_shared<Region>(key, offset, byte_size, mapping, mapped);
  MutexLock lock(mu_);
  if (!regions_.emplace(name, std::move(region)).second) return InvalidArgument(what + " is already registered");
  return Status::Ok();
}

Status SystemSharedMemory::Unregister(const std::string& name) {
  MutexLock lock(mu_);
  if (name.empty()) {
    regions_.clear();
    return Status::Ok();
  }
  if (regions_.erase(name) == 0) return NotFound("shared memory region '" + name + "' is not registered");
  return Status::Ok();
}

StatusOr<std::vector<SystemSharedMemory::RegionStatus>> SystemSharedMemory::List(const std::string& name) const {
  MutexLock lock(mu_);
  std::vector<RegionStatus> out;
  for (const auto& [n, r] : regions_) {
    if (name.empty() || n == name) out.push_back({n, r->key(), r->offset(), r->byte_size()});
  }
  if (!name.empty() && out.empty()) return NotFound("shared memory region '" + name + "' is not registered");
  return out;
}

StatusOr<SystemSharedMemory::Use> SystemSharedMemory::Find(const std::string& name, uint64_t offset,
                                                           uint64_t byte_size) const {
  std::shared_ptr<Region> region;
  {
    MutexLock lock(mu_);
    auto it = regions_.find(name);
    if (it == regions_.end()) return NotFound("shared memory region '" + name + "' is not registered");
    region = it->second;
  }
  if (offset > region->byte_size() || byte_size > region->byte_size() - offset) {
    return InvalidArgument("shared memory region '" + name + "': offset " + std::to_string(offset) + " and byte size " +
                           std::to_string(byte_size) + " reach past its " + std::to_string(region->byte_size()) +
                           " bytes");
  }
  std::span<uint8_t> bytes = region->bytes().subspan(static_cast<size_t>(offset), static_cast<size_t>(byte_size));
  return Use{std::move(region), bytes};
}

Status WriteSharedMemoryOutputs(const std::vector<InferOutput>& outputs,
                                const std::vector<SharedMemoryOutput>& regions) {
  for (const SharedMemoryOutput& r : regions) {
    auto output = std::find_if(outputs.begin(), outputs.end(), [&](const InferOutput& o) { return o.name == r.name; });
    if (output == outputs.end()) continue;  // not an output of the model: the request was refused for it
    const size_t bytes = output->data.bytes();
    if (bytes > r.use.bytes.size()) {
      return InvalidArgument("output '" + r.name + "' takes " + std::to_string(bytes) +
                             " bytes; shared memory region '" + r.region + "' was given " +
                             std::to_string(r.use.bytes.size()) + " for it");
    }
    if (bytes) std::memcpy(r.use.bytes.data(), output->data.raw(), bytes);
  }
  return Status::Ok();
}

}  // namespace rankd
