// MappedFile: a read-only memory map of a model's external-data file (its tables), which replacing
// the file on disk can neither crash nor silently change.
//
// Tables are mapped, not copied: a 3 GB table loads with little resident memory and pages in as it
// is read. The file's descriptor is held while the mapping lives and its size and modification time
// are recorded at open. Check() compares them with the file now, so a version serving from a file
// rewritten in place (`cp new.data model.onnx.data`, or a write at the same size) refuses its
// requests instead of scoring with bytes it did not load. A file replaced by rename (`mv`) leaves
// the held file untouched and the loaded version serves on.
//
// A read of a page that truncation removed raises SIGBUS: the mapping is watched (common/sigbus_guard.h),
// so zero pages replace it (the read completes, with zeros) and Check() fails every request that
// may have read them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/sigbus_guard.h"
#include "rankd/status.h"

namespace rankd {

class MappedFile {
 public:
  static StatusOr<std::shared_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // The descriptor it was opened with (open while the mapping lives): the file as loaded.
  int fd() const { return fd_; }
  // OK while the file is as it was when opened; Unavailable, naming the file, once it was truncated
  // under the mapping or rewritten.
  Status Check() const;
  // Whether any byte of [at, at + bytes) lies in a file mapped by a MappedFile alive now (or in
  // another range watched for truncation: a shared memory region). Such memory is the page cache's: a GPU backend
  // copies it rather than page-locking it in place (long-term pinning of file pages can spin in the kernel while it
  // migrates them).
  static bool Overlaps(const void* at, size_t bytes);

 private:
  MappedFile() = default;

  std::string path_;
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int64_t mtime_ns_ = 0;
  std::unique_ptr<SigbusGuard> guard_;  // while mapped
};

}  // namespace rankd
