// RowFile: a table's rows in a file on disk, read a batch at a time (the SSD tier's read path,
// docs/embedding.md, "Rows on disk").
//
// The file holds `rows` rows of `row_bytes` bytes each, one after another from `offset` (a table
// file, or the table's range in an ONNX external-data file). Read(ids) fetches the rows of a batch
// of ids with asynchronous reads submitted together through io_uring (Debian's liburing): the
// distinct aligned spans the rows lie in, neighbours merged into one read, all in flight at once up
// to the ring's depth, so a batch costs about one device round trip rather than one per row.
//
// Reads bypass the page cache (O_DIRECT), so a host budget for rows is what the process holds, not
// what the kernel caches besides; a filesystem that refuses O_DIRECT (tmpfs) is read through the page
// cache instead, which `direct()` reports. The file is read through the descriptor opened here and
// never mapped: a file replaced on disk (renamed over) keeps being read as it was opened, and one
// truncated under it fails the batch that reaches past its new end (Internal, naming the file and
// the row) instead of raising SIGBUS or returning other bytes. Thread-safe: batches read one at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/mutex.h"
#include "rankd/status.h"

namespace rankd {

struct RowFileOptions {
  int queue_depth = 64;                       // reads in flight at once
  size_t max_read_bytes = size_t{128} << 10;  // neighbouring spans merge into reads of at most this
  bool direct = true;                         // O_DIRECT where the filesystem takes it
};

struct RowFileStats {
  uint64_t batches = 0;
  uint64_t rows = 0;        // rows asked for (repeats included)
  uint64_t reads = 0;       // reads submitted
  uint64_t bytes_read = 0;  // bytes the reads returned (whole aligned blocks)
};

class RowFile {
 public:
  // InvalidArgument when the file is shorter than offset + rows * row_bytes; NotFound when absent.
  static StatusOr<std::unique_ptr<RowFile>> Open(const std::string& path, int64_t offset, int64_t rows,
                                                 size_t row_bytes, const RowFileOptions& options = {});
  ~RowFile();
  RowFile(const RowFile&) = delete;
  RowFile& operator=(const RowFile&) = delete;

  // Row ids[i] into out + i * row_bytes. InvalidArgument for an id outside [0, rows), an error for
  // a row the file no longer holds (Internal), Unavailable for a failed read; `out` is then undefined.
  Status Read(std::span<const int64_t> ids, void* out);

  // Another reader of the same file (through this one's descriptor, so the file as it was opened,
  // whatever replaced or unlinked it since), with a ring of its own: batches it reads do not wait
  // for this one's.
  StatusOr<std::unique_ptr<RowFile>> Reopen() const;

  // InvalidArgument naming the first id outside [0, rows).
  Status CheckIds(std::span<const int64_t> ids) const;

  const std::string& path() const { return path_; }
  bool direct() const { return direct_; }
  int64_t rows() const { return rows_; }
  size_t row_bytes() const { return row_bytes_; }
  RowFileStats stats() const;

  // Reads start and end on multiples of this (O_DIRECT's alignment; harmless without it).
  static constexpr size_t kAlign = 4096;

 private:
  struct Ring;
  RowFile(std::string path, int fd, bool direct, int64_t offset, int64_t rows, size_t row_bytes,
          const RowFileOptions& options, std::unique_ptr<Ring> ring);

  const std::string path_;
  const int fd_;
  const bool direct_;
  const int64_t offset_, rows_;
  const size_t row_bytes_;
  const RowFileOptions options_;
  mutable Mutex mu_;
  std::unique_ptr<Ring> ring_ RANKD_GUARDED_BY(mu_);
  RowFileStats stats_ RANKD_GUARDED_BY(mu_);
};

}  // namespace rankd
