// GracePeriod: readers announce the span in which they may read shared state; a writer that has
// unpublished something waits until every reader that entered before it asked has left, after
// which nobody can still hold what was unpublished (the grace period of read-copy-update).
//
// The GPU cache of a table (backend/cuda/row_cache.h) uses it between taking a row out of a slot
// and writing another row there: executors enter for a run's launches and leave once its kernels
// have finished. Readers never wait for writers, nor for each other; a writer waits only for the
// readers already inside, so a steady stream of new readers cannot starve it. Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <set>

#include "common/mutex.h"

namespace rankd {

class GracePeriod {
 public:
  // A reader enters; Exit with the ticket returned.
  uint64_t Enter();
  void Exit(uint64_t ticket);
  // Returns once every reader that entered before this call has exited.
  void WaitForEarlierReaders();
  // Readers inside now.
  size_t readers() const;

 private:
  mutable Mutex mu_;
  std::condition_variable left_;
  uint64_t next_ RANKD_GUARDED_BY(mu_) = 0;
  std::set<uint64_t> inside_ RANKD_GUARDED_BY(mu_);
};

// Enters `period` (when not null) for its lifetime.
class GraceReader {
 public:
  explicit GraceReader(GracePeriod* period) : period_(period), ticket_(period ? period->Enter() : 0) {}
  ~GraceReader() {
    if (period_) period_->Exit(ticket_);
  }
  GraceReader(const GraceReader&) = delete;
  GraceReader& operator=(const GraceReader&) = delete;

 private:
  GracePeriod* period_;
  uint64_t ticket_;
};

}  // namespace rankd
