// Must not build under -Wthread-safety: value_unlocked reads the field without its mutex.
#include "counter.h"

void probe::Counter::Add() {
  rankd::MutexLock lock(mu_);
  ++value_;
}

int probe::Counter::value_unlocked() const { return value_; }

int main() {
  probe::Counter c;
  c.Add();
  return c.value_unlocked();
}
