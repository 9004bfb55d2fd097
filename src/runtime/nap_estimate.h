// How long a run's thread sleeps before it spins on the device (`--cuda device_wait=nap`,
// docs/cuda.md), or before the GPU's poller first looks at the run (`poller`): an estimate of the
// time runs of one bound plan keep the host waiting after their launch, learnt from those runs. The
// thread sleeps through 80% of it, then spins (or is polled) to the run's end.
//
// Built to fail safe on a run far longer than the others (the first after a capture, a contended
// GPU): no nap before two runs were measured, and the lesser of those two starts the estimate; a
// later run counts for at most twice the estimate; a run found done on waking (the nap may have
// lasted well past its end) halves it. Not thread-safe: one per bound plan, used by the thread
// that runs it.
#pragma once

namespace rankd {

class NapEstimate {
 public:
  // Microseconds to sleep before spinning (0: spin at once).
  double NapUs() const;
  // The run was done when the thread woke from a nap of NapUs() > 0.
  void DoneOnWaking();
  // The run ended `waited_us` after its launch, the thread spinning at the end.
  void Waited(double waited_us);

  // Shorter estimated waits are not napped through: a sleep this short ends late by about as much
  // as it lasts.
  static constexpr double kShortestUs = 30;

 private:
  double estimate_us_ = 0;
  int measured_ = 0;  // runs measured, counted up to 2
};

}  // namespace rankd
