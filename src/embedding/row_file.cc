#include "embedding/row_file.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace rankd {
namespace {

size_t AlignDown(uint64_t x) { return static_cast<size_t>(x / RowFile::kAlign * RowFile::kAlign); }
size_t AlignUp(uint64_t x) { return AlignDown(x + RowFile::kAlign - 1); }

// A read of [start, start + bytes) of the file into `at`; `got` what it returned.
struct Span {
  size_t start = 0, bytes = 0;
  uint8_t* at = nullptr;
  int64_t got = 0;
};

struct FreeAligned {
  void operator()(void* p) const { std::free(p); }
};

std::string Errno(int error) { return std::strerror(error); }

}  // namespace

struct RowFile::Ring {
  io_uring ring{};
  bool live = false;  // initialised
  ~Ring() {
    if (live) io_uring_queue_exit(&ring);
  }
};

StatusOr<std::unique_ptr<RowFile>> RowFile::Open(const std::string& path, int64_t offset, int64_t rows,
                                                 size_t row_bytes, const RowFileOptions& options) {
  if (offset < 0 || rows < 0 || row_bytes == 0 || options.queue_depth < 1) {
    return InvalidArgument("row file '" + path + "': a negative offset or row count, or rows of no bytes");
  }
  bool direct = options.direct;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
  if (fd < 0 && direct && errno == EINVAL) {  // the filesystem takes no direct reads (tmpfs)
    direct = false;
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0) {
    const int error = errno;
    const std::string what = "row file '" + path + "': " + Errno(error);
    return error == ENOENT ? NotFound(what) : Unavailable(what);
  }
  struct stat st {};
  const uint64_t need = static_cast<uint64_t>(offset) + static_cast<uint64_t>(rows) * row_bytes;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) < need) {
    close(fd);
    return InvalidArgument("row file '" + path + "' holds " + std::to_string(st.st_size) + " bytes; " +
                           std::to_string(rows) + " rows of " + std::to_string(row_bytes) + " bytes from byte " +
                           std::to_string(offset) + " need " + std::to_string(need));
  }
  auto ring = std::make_unique<Ring>();
  if (int r = io_uring_queue_init(static_cast<unsigned>(options.queue_depth), &ring->ring, 0); r < 0) {
    close(fd);
    return Unavailable("row file '" + path + "': io_uring: " + Errno(-r));
  }
  ring->live = true;
  return std::unique_ptr<RowFile>(new RowFile(path, fd, direct, offset, rows, row_bytes, options, std::move(ring)));
}

RowFile::RowFile(std::string path, int fd, bool direct, int64_t offset, int64_t rows, size_t row_bytes,
                 const RowFileOptions& options, std::unique_ptr<Ring> ring)
    : path_(std::move(path)),
      fd_(fd),
      direct_(direct),
      offset_(offset),
      rows_(rows),
      row_bytes_(row_bytes),
      options_(options),
      ring_(std::move(ring)) {}

RowFile::~RowFile() {
  {
    MutexLock lock(mu_);
    ring_.reset();
  }
  close(fd_);
}

RowFileStats RowFile::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

StatusOr<std::unique_ptr<RowFile>> RowFile::Reopen() const {
  return Open("/proc/self/fd/" + std::to_string(fd_), offset_, rows_, row_bytes_, options_);
}

Status RowFile::CheckIds(std::span<const int64_t> ids) const {
  for (int64_t id : ids) {
    if (id < 0 || id >= rows_) {
      return InvalidArgument("row file '" + path_ + "': row " + std::to_string(id) + " is outside its " +
                             std::to_string(rows_) + " rows");
    }
  }
  return Status::Ok();
}

Status RowFile::Read(std::span<const int64_t> ids, void* out) {
  if (ids.empty()) return Status::Ok();
  // The aligned span of each row, then the distinct spans in file order, neighbours merged.
  std::vector<size_t> row_start(ids.size());
  std::vector<Span> spans;
  spans.reserve(ids.size());
  RANKD_RETURN_IF_ERROR(CheckIds(ids));
  for (size_t i = 0; i < ids.size(); ++i) {
    row_start[i] = static_cast<size_t>(offset_) + static_cast<size_t>(ids[i]) * row_bytes_;
    const size_t start = AlignDown(row_start[i]);
    spans.push_back({start, AlignUp(row_start[i] + row_bytes_) - start});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  std::vector<Span> reads;
  for (const Span& s : spans) {
    if (!reads.empty()) {
      Span& last = reads.back();
      const size_t end = std::max(last.start + last.bytes, s.start + s.bytes);
      if (s.start <= last.start + last.bytes && end - last.start <= options_.max_read_bytes) {
        last.bytes = end - last.start;
        continue;
      }
      if (s.start + s.bytes <= last.start + last.bytes) continue;  // inside a read at its size limit
    }
    reads.push_back(s);
  }
  size_t total = 0;
  for (const Span& r : reads) total += r.bytes;
  std::unique_ptr<uint8_t, FreeAligned> buffer(static_cast<uint8_t*>(std::aligned_alloc(kAlign, total)));
  if (!buffer)
    return ResourceExhausted("row file '" + path_ + "': no memory for a batch of " + std::to_string(total) + " bytes");
  size_t at = 0;
  for (Span& r : reads) {
    r.at = buffer.get() + at;
    at += r.bytes;
  }

  MutexLock lock(mu_);
  io_uring* ring = &ring_->ring;
  size_t submitted = 0, completed = 0;
  int failure = 0;
  while (completed < reads.size()) {
    // Keep the ring full: as many reads in flight as it holds.
    while (submitted < reads.size() && submitted - completed < static_cast<size_t>(options_.queue_depth)) {
      io_uring_sqe* sqe = io_uring_get_sqe(ring);
      if (!sqe) break;
      Span& r = reads[submitted];
      io_uring_prep_read(sqe, fd_, r.at, static_cast<unsigned>(r.bytes), static_cast<__u64>(r.start));
      io_uring_sqe_set_data64(sqe, submitted);
      ++submitted;
    }
    if (int r = io_uring_submit_and_wait(ring, 1); r < 0 && r != -EINTR) {
      failure = -r;
      break;
    }
    io_uring_cqe* cqe = nullptr;
    unsigned head = 0, seen = 0;
    io_uring_for_each_cqe(ring, head, cqe) {
      Span& r = reads[static_cast<size_t>(io_uring_cqe_get_data64(cqe))];
      r.got = cqe->res;
      if (cqe->res < 0 && failure == 0) failure = -cqe->res;
      ++seen;
    }
    io_uring_cq_advance(ring, seen);
    completed += seen;
  }
  // A failed submission leaves reads in flight: wait for them before the buffer goes.
  while (completed < submitted) {
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(ring, &cqe) < 0) break;
    io_uring_cqe_seen(ring, cqe);
    ++completed;
  }
  stats_.batches += 1;
  stats_.rows += ids.size();
  stats_.reads += submitted;
  for (const Span& r : reads) stats_.bytes_read += r.got > 0 ? static_cast<uint64_t>(r.got) : 0;
  lock.Unlock();
  if (failure != 0) return Unavailable("row file '" + path_ + "': a read failed: " + Errno(failure));

  // Each row from the read that holds it; a read cut short (the file truncated under us) fails
  // the rows past what it returned.
  auto* to = static_cast<uint8_t*>(out);
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = std::upper_bound(reads.begin(), reads.end(), row_start[i],
                               [](size_t start, const Span& r) { return start < r.start; });
    const Span& r = *(it - 1);
    const size_t from = row_start[i] - r.start;
    if (static_cast<int64_t>(from + row_bytes_) > r.got) {
      return Internal("row file '" + path_ + "' ends before row " + std::to_string(ids[i]) +
                      ": it was cut short after it was opened");
    }
    std::memcpy(to + i * row_bytes_, r.at + from, row_bytes_);
  }
  return Status::Ok();
}

}  // namespace rankd
