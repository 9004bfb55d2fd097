// SigbusGuard: memory mapped from a file or a shared memory object that someone else may shrink.
// A read or write of a page that truncation removed raises SIGBUS, which would end the process. A
// process-wide handler, installed by the first Watch, puts zero pages over the whole of a watched
// range instead (writable where the range is: the access completes, on memory that is no longer
// the file's) and marks it faulted, so its owner fails whatever may have touched it. A SIGBUS
// anywhere else takes its course as before (the handler installed earlier, or the default).
#pragma once

#include <cstddef>
#include <memory>

namespace rankd {

class SigbusGuard {
 public:
  // Watches [begin, begin + bytes) (whole pages). Null when too many ranges are watched already.
  static std::unique_ptr<SigbusGuard> Watch(const void* begin, size_t bytes, bool writable);
  ~SigbusGuard();  // stops watching (before the range is unmapped)
  SigbusGuard(const SigbusGuard&) = delete;
  SigbusGuard& operator=(const SigbusGuard&) = delete;

  // Whether a SIGBUS in the range replaced it with zero pages.
  bool faulted() const;
  // Whether any byte of [at, at + bytes) lies in a range watched now.
  static bool Overlaps(const void* at, size_t bytes);
  // How many ranges may be watched at once.
  static constexpr int kMaxRanges = 4096;

 private:
  explicit SigbusGuard(int slot) : slot_(slot) {}
  int slot_;
};

}  // namespace rankd
