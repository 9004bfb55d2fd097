#include "common/grace_period.h"

namespace rankd {

uint64_t GracePeriod::Enter() {
  MutexLock lock(mu_);
  const uint64_t ticket = next_++;
  inside_.insert(ticket);
  return ticket;
}

void GracePeriod::Exit(uint64_t ticket) {
  {
    MutexLock lock(mu_);
    inside_.erase(ticket);
  }
  left_.notify_all();
}

void GracePeriod::WaitForEarlierReaders() {
  MutexLock lock(mu_);
  const uint64_t bound = next_;  // tickets below it entered before this call
  while (!inside_.empty() && *inside_.begin() < bound) left_.wait(lock.native());
}

size_t GracePeriod::readers() const {
  MutexLock lock(mu_);
  return inside_.size();
}

}  // namespace rankd
