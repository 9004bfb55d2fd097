// A counter whose field its mutex guards (common/mutex.h), for the thread-safety probes.
#pragma once

#include "common/mutex.h"

namespace probe {

class Counter {
 public:
  void Add();
  int value_unlocked() const;  // defined in unguarded.cc only: reads the field without the lock

 private:
  mutable rankd::Mutex mu_;
  int value_ RANKD_GUARDED_BY(mu_) = 0;
};

}  // namespace probe
