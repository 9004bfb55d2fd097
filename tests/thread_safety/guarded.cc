// Builds under -Wthread-safety: the field is touched with its mutex held.
#include "counter.h"

void probe::Counter::Add() {
  rankd::MutexLock lock(mu_);
  ++value_;
}

int main() {
  probe::Counter c;
  c.Add();
  return 0;
}
