// How long a run's thread sleeps before it spins on the device (`--cuda device_wait=nap` and
// `poll`, docs/cuda.md): an estimate of the time runs of one bound plan keep the host waiting after
// their launch, learnt from those runs. The thread sleeps through 80% of it, then spins to the
// run's end (`nap`), or spins for at most SpinUs() and then sleeps SliceUs() between queries
// (`poll`: a run that keeps the host waiting far past the estimate, as runs do when many share a
// busy GPU, costs a query per slice instead of a core).
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
  // The run ended `waited_us` after its launch, the thread spinning (or polling) at the end.
  void Waited(double waited_us);
  // After waking (`poll`): microseconds to spin before sleeping between queries, and each sleep.
  // Bounded by the estimate: a quarter of it spun (a steady run ends within it, as with `nap`),
  // slices of a tenth, between kShortestSliceUs and kLongestSliceUs.
  double SpinUs() const;
  double SliceUs() const;

  // Shorter estimated waits are not napped through: a sleep this short ends late by about as much
  // as it lasts.
  static constexpr double kShortestUs = 30;
  static constexpr double kShortestSpinUs = 20;
  static constexpr double kShortestSliceUs = 10;
  static constexpr double kLongestSliceUs = 50;

 private:
  double estimate_us_ = 0;
  int measured_ = 0;  // runs measured, counted up to 2
};

}  // namespace rankd
