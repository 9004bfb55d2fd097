#include "model/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/sigbus_guard.h"

namespace rankd {
namespace {

int64_t MtimeNs(const struct stat& st) { return int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec; }

}  // namespace

bool MappedFile::Overlaps(const void* at, size_t bytes) { return SigbusGuard::Overlaps(at, bytes); }

StatusOr<std::shared_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file->fd_ < 0) return NotFound("external data file '" + path + "' cannot be opened");
  struct stat st {};
  if (::fstat(file->fd_, &st) != 0) return NotFound("external data file '" + path + "' cannot be read");
  file->size_ = static_cast<size_t>(st.st_size);
  file->mtime_ns_ = MtimeNs(st);
  if (file->size_ == 0) return file;
  void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, file->fd_, 0);
  if (p == MAP_FAILED) return Internal("mmap of '" + path + "' failed");
  file->data_ = static_cast<const uint8_t*>(p);
  file->guard_ = SigbusGuard::Watch(p, file->size_, /*writable=*/false);
  if (!file->guard_) {
    return Unavailable("too many files are mapped (" + std::to_string(SigbusGuard::kMaxRanges) + ")");
  }
  return file;
}

MappedFile::~MappedFile() {
  guard_.reset();  // before the range is unmapped
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

Status MappedFile::Check() const {
  if (guard_ && guard_->faulted()) {
    return Unavailable("external data file '" + path_ + "' was truncated while serving; reload the model");
  }
  struct stat st {};
  if (fd_ >= 0 && (::fstat(fd_, &st) != 0 || static_cast<size_t>(st.st_size) != size_ || MtimeNs(st) != mtime_ns_)) {
    return Unavailable("external data file '" + path_ + "' changed on disk after the model loaded; reload the model");
  }
  return Status::Ok();
}

}  // namespace rankd
