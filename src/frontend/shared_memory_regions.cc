#include "frontend/shared_memory_regions.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "common/host_copies.h"
#include "common/log.h"
#include "common/sigbus_guard.h"
#include "runtime/backends.h"

namespace rankd {
namespace {

using Kind = SharedMemoryRegions::Kind;

// Page-locked bytes counted against SharedMemoryRegions' limit while a region holds them.
struct PinnedBytes {
  std::unique_ptr<PinnedHostMemory> memory;
  uint64_t bytes = 0;
  std::shared_ptr<std::atomic<uint64_t>> counter;
};

// A range of a POSIX shared memory object, mapped from its start to the range's end; its object
// kept open, so that a truncation is found by its size as well as by a fault.
class SystemRegion final : public SharedMemoryRegions::Region {
 public:
  // `copy_unless_locked`: on a GPU server an unlocked region's bytes are copied, not viewed
  // (SetPinning).
  SystemRegion(std::string key, uint64_t offset, uint64_t byte_size, int fd, void* mapping, size_t mapped_bytes,
               std::unique_ptr<SigbusGuard> guard, bool copy_unless_locked)
      : key_(std::move(key)),
        offset_(offset),
        byte_size_(byte_size),
        fd_(fd),
        mapping_(mapping),
        mapped_bytes_(mapped_bytes),
        guard_(std::move(guard)),
        copy_unless_locked_(copy_unless_locked) {}
  ~SystemRegion() override {
    if (pinned_.memory) {  // unlocked while still mapped
      pinned_.memory.reset();
      pinned_.counter->fetch_sub(pinned_.bytes);
    }
    guard_.reset();  // before the range is unmapped
    munmap(mapping_, mapped_bytes_);
    close(fd_);
  }
  // The pages from the region's first to the mapping's last: what a view of its bytes may read.
  std::pair<void*, size_t> Pages() const {
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto first = reinterpret_cast<uintptr_t>(Base()) / page * page;
    const auto end = (reinterpret_cast<uintptr_t>(mapping_) + mapped_bytes_ + page - 1) / page * page;
    return {reinterpret_cast<void*>(first), static_cast<size_t>(end - first)};
  }
  void Pin(PinnedBytes pinned) { pinned_ = std::move(pinned); }
  bool page_locked() const override { return pinned_.memory != nullptr; }
  Kind kind() const override { return Kind::kSystem; }
  SharedMemoryRegions::RegionStatus status(const std::string& name) const override {
    return {name, key_, offset_, byte_size_, 0};
  }
  uint64_t byte_size() const override { return byte_size_; }
  // A client that truncates its object under the mapping gets an error, not a crashed server: the
  // guard puts zero pages over the region at the fault, and every copy after it fails.
  Status Read(uint64_t at, void* dst, size_t bytes) const override {
    if (bytes) std::memcpy(dst, Base() + at, bytes);
    CountHostCopy(HostCopy::kRequest, bytes);
    return Intact();
  }
  Status Write(uint64_t at, const void* src, size_t bytes) const override {
    RANKD_RETURN_IF_ERROR(Intact());
    if (bytes) std::memcpy(Base() + at, src, bytes);
    return Intact();
  }
  // The mapping ends at a page boundary past offset + byte_size: kernels may read up to 64 bytes
  // past a tensor's end, as Tensor::Empty allows them to.
  void* InPlace(uint64_t at, uint64_t bytes) const override {
    if (copy_unless_locked_ && !page_locked()) return nullptr;
    uint8_t* p = Base() + at;
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t mapped_end = (mapped_bytes_ + page - 1) / page * page;
    const size_t end = static_cast<size_t>(p - static_cast<uint8_t*>(mapping_)) + static_cast<size_t>(bytes);
    if (reinterpret_cast<uintptr_t>(p) % 64 != 0 || end + 64 > mapped_end) return nullptr;
    return p;
  }
  // A GPU reading page-locked pages of a truncated object reads the pages it holds, and no fault
  // tells: the object's size does.
  Status Check() const override {
    struct stat st {};
    if (fstat(fd_, &st) == 0 && static_cast<uint64_t>(st.st_size) < offset_ + byte_size_) return Truncated();
    return Intact();
  }

 private:
  uint8_t* Base() const { return static_cast<uint8_t*>(mapping_) + offset_; }
  Status Intact() const { return guard_->faulted() ? Truncated() : Status::Ok(); }
  Status Truncated() const {
    return InvalidArgument("shared memory object '" + key_ +
                           "' was truncated after it was registered: unregister the region and register it again");
  }
  std::string key_;
  uint64_t offset_, byte_size_;
  int fd_;
  void* mapping_;
  size_t mapped_bytes_;
  std::unique_ptr<SigbusGuard> guard_;
  PinnedBytes pinned_;
  const bool copy_unless_locked_;
};

// Device memory of another process, opened through the CUDA backend of its GPU.
class CudaRegion final : public SharedMemoryRegions::Region {
 public:
  CudaRegion(int device, std::unique_ptr<SharedDeviceMemory> memory) : device_(device), memory_(std::move(memory)) {}
  Kind kind() const override { return Kind::kCuda; }
  SharedMemoryRegions::RegionStatus status(const std::string& name) const override {
    return {name, "", 0, memory_->byte_size(), device_};
  }
  uint64_t byte_size() const override { return memory_->byte_size(); }
  Status Read(uint64_t at, void* dst, size_t bytes) const override {
    CountHostCopy(HostCopy::kRequest, bytes);
    return memory_->Read(at, dst, bytes);
  }
  Status Write(uint64_t at, const void* src, size_t bytes) const override { return memory_->Write(at, src, bytes); }
  bool reads_wait() const override { return true; }
  Status ReadMany(std::span<const SharedDeviceMemory::Piece> pieces) const override {
    for (const auto& p : pieces) CountHostCopy(HostCopy::kRequest, p.bytes);
    return memory_->ReadMany(pieces);
  }

 private:
  int device_;
  std::unique_ptr<SharedDeviceMemory> memory_;
};

const char* KindName(Kind kind) { return kind == Kind::kCuda ? "CUDA shared memory" : "shared memory"; }

}  // namespace

SharedMemoryRegions::SharedMemoryRegions() : pinned_bytes_(std::make_shared<std::atomic<uint64_t>>(0)) {}

void SharedMemoryRegions::SetPinning(const Backend* backend, uint64_t limit_bytes) {
  MutexLock lock(mu_);
  gpus_ = backend != nullptr;
  pin_backend_ = limit_bytes > 0 ? backend : nullptr;
  pin_limit_ = limit_bytes;
}

uint64_t SharedMemoryRegions::pinned_bytes() const { return pinned_bytes_->load(); }

Status SharedMemoryRegions::Add(const std::string& name, std::shared_ptr<const Region> region) {
  MutexLock lock(mu_);
  if (!regions_.emplace(name, std::move(region)).second) {
    return InvalidArgument("shared memory region '" + name + "' is already registered");
  }
  return Status::Ok();
}

Status SharedMemoryRegions::Register(const std::string& name, const std::string& key, uint64_t offset,
                                     uint64_t byte_size) {
  const std::string what = "shared memory region '" + name + "'";
  if (name.empty()) return InvalidArgument("a shared memory region needs a name");
  if (byte_size == 0) return InvalidArgument(what + ": byte_size must be at least 1");
  const Backend* pin_backend = nullptr;  // how SetPinning left things
  uint64_t limit = 0;
  bool gpus = false;
  {
    MutexLock lock(mu_);
    if (regions_.count(name)) return InvalidArgument(what + " is already registered");
    pin_backend = pin_backend_;
    limit = pin_limit_;
    gpus = gpus_;
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
  if (mapping == MAP_FAILED) {
    const int error = errno;
    close(fd);
    return InvalidArgument(what + ": cannot map '" + key + "': " + std::strerror(error));
  }
  std::unique_ptr<SigbusGuard> guard = SigbusGuard::Watch(mapping, mapped, /*writable=*/true);
  if (!guard) {
    munmap(mapping, mapped);
    close(fd);
    return Unavailable(what + ": too many files and regions are mapped (" + std::to_string(SigbusGuard::kMaxRanges) +
                       ")");
  }
  auto region = std::make_shared<SystemRegion>(key, offset, byte_size, fd, mapping, mapped, std::move(guard), gpus);
  if (pin_backend) {
    const auto [pages, bytes] = region->Pages();
    uint64_t now = pinned_bytes_->load();
    do {
      if (now + bytes > limit) {
        return ResourceExhausted(what + ": its " + std::to_string(bytes) + " bytes (whole pages) would take the " +
                                 "page-locked shared memory to " + std::to_string(now + bytes) + " bytes, past the " +
                                 "limit of " + std::to_string(limit) + " (rankd serve --shared-memory-pin-limit-mb)");
      }
    } while (!pinned_bytes_->compare_exchange_weak(now, now + bytes));
    auto pinned = pin_backend->PinHostMemory(pages, bytes);
    if (pinned.ok()) {
      region->Pin({std::move(*pinned), bytes, pinned_bytes_});
    } else {
      pinned_bytes_->fetch_sub(bytes);
      LogWarning(what + " is not page-locked for the GPU (" + pinned.status().ToString() +
                 "): its inputs are copied as requests are read");
    }
  }
  return Add(name, std::move(region));
}

Status SharedMemoryRegions::RegisterCuda(const std::string& name, const std::string& raw_handle, int64_t device_id,
                                         uint64_t byte_size) {
  const std::string what = "CUDA shared memory region '" + name + "'";
  if (name.empty()) return InvalidArgument("a shared memory region needs a name");
  if (byte_size == 0) return InvalidArgument(what + ": byte_size must be at least 1");
  if (device_id < 0 || device_id > 1024)
    return InvalidArgument(what + ": there is no GPU " + std::to_string(device_id));
  {
    MutexLock lock(mu_);
    if (regions_.count(name)) return InvalidArgument(what + " is already registered");
  }
  auto backend = FindBackend("cuda", static_cast<int>(device_id));
  if (!backend.ok()) return backend.status().WithContext(what);
  auto memory = (*backend)->OpenSharedMemory(raw_handle, byte_size);
  if (!memory.ok()) return memory.status().WithContext(what);
  return Add(name, std::make_shared<CudaRegion>(static_cast<int>(device_id), std::move(*memory)));
}

Status SharedMemoryRegions::Unregister(Kind kind, const std::string& name) {
  std::vector<std::shared_ptr<const Region>> dropped;  // closed outside the lock
  MutexLock lock(mu_);
  for (auto it = regions_.begin(); it != regions_.end();) {
    if (it->second->kind() == kind && (name.empty() || it->first == name)) {
      dropped.push_back(std::move(it->second));
      it = regions_.erase(it);
    } else {
      ++it;
    }
  }
  if (!name.empty() && dropped.empty()) {
    return NotFound(std::string(KindName(kind)) + " region '" + name + "' is not registered");
  }
  return Status::Ok();
}

StatusOr<std::vector<SharedMemoryRegions::RegionStatus>> SharedMemoryRegions::List(Kind kind,
                                                                                   const std::string& name) const {
  MutexLock lock(mu_);
  std::vector<RegionStatus> out;
  for (const auto& [n, r] : regions_) {
    if (r->kind() == kind && (name.empty() || n == name)) out.push_back(r->status(n));
  }
  if (!name.empty() && out.empty()) {
    return NotFound(std::string(KindName(kind)) + " region '" + name + "' is not registered");
  }
  return out;
}

StatusOr<SharedMemoryRegions::Use> SharedMemoryRegions::Find(const std::string& name, uint64_t offset,
                                                             uint64_t byte_size) const {
  std::shared_ptr<const Region> region;
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
  return Use{std::move(region), offset, byte_size};
}

Tensor SharedMemoryRegions::Use::View(DType dtype, Shape shape) const {
  void* p = region->InPlace(offset, size);
  if (!p) return Tensor();
  return Tensor::View(dtype, std::move(shape), p,
                      region->page_locked() ? MemoryLocation::Pinned() : MemoryLocation::SharedMemory(), region);
}

Status CheckSharedMemoryInputs(const std::vector<SharedMemoryRegions::Use>& inputs) {
  // Each region once (a check reads its object's size): a request's inputs often share one.
  std::vector<const SharedMemoryRegions::Region*> checked;
  for (const SharedMemoryRegions::Use& use : inputs) {
    if (std::find(checked.begin(), checked.end(), use.region.get()) != checked.end()) continue;
    RANKD_RETURN_IF_ERROR(use.region->Check());
    checked.push_back(use.region.get());
  }
  return Status::Ok();
}

Status SharedMemoryReads::Read(const SharedMemoryRegions::Use& use, void* dst) {
  if (!use.region->reads_wait()) return use.Read(dst);
  pending_.push_back({use.region, {use.offset, dst, static_cast<size_t>(use.size)}});
  return Status::Ok();
}

Status SharedMemoryReads::Finish() {
  // Each region's reads in one call, in the order they were asked for.
  std::vector<SharedDeviceMemory::Piece> pieces;
  for (size_t i = 0; i < pending_.size(); ++i) {
    const SharedMemoryRegions::Region* region = pending_[i].region.get();
    if (!region) continue;  // read with an earlier one's region
    pieces.clear();
    for (size_t j = i; j < pending_.size(); ++j) {
      if (pending_[j].region.get() != region) continue;
      pieces.push_back(pending_[j].piece);
      if (j > i) pending_[j].region.reset();
    }
    RANKD_RETURN_IF_ERROR(region->ReadMany(pieces));
  }
  pending_.clear();
  return Status::Ok();
}

Status WriteSharedMemoryOutputs(const std::vector<InferOutput>& outputs,
                                const std::vector<SharedMemoryOutput>& regions) {
  for (const SharedMemoryOutput& r : regions) {
    auto output = std::find_if(outputs.begin(), outputs.end(), [&](const InferOutput& o) { return o.name == r.name; });
    if (output == outputs.end()) continue;  // not an output of the model: the request was refused for it
    const size_t bytes = output->data.bytes();
    if (bytes > r.use.size) {
      return InvalidArgument("output '" + r.name + "' takes " + std::to_string(bytes) +
                             " bytes; shared memory region '" + r.region + "' was given " + std::to_string(r.use.size) +
                             " for it");
    }
    RANKD_RETURN_IF_ERROR(r.use.Write(output->data.raw(), bytes).WithContext("output '" + r.name + "'"));
  }
  return Status::Ok();
}

}  // namespace rankd
