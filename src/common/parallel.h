// ParallelFor: splits [0, n) into contiguous chunks over the CPU backend's threads (OpenMP).
// Runs inline when the work is small (n * cost_per_item under ~32k units) or already inside a
// parallel region. `fn(begin, end)` must be safe to call concurrently on disjoint ranges.
//
// Every parallel region asks for the whole team, also when there are fewer chunks than threads
// (the surplus threads find no chunk): libgomp ends the pool's surplus threads when a region asks
// for fewer than the one before, and the next full region (oneDNN's products ask for all of them)
// then creates them anew - 0.5 ms of W1's 1.1 at 4 pairs on 16 threads (docs/engine.md).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace rankd {

template <typename F>
void ParallelFor(int64_t n, int64_t cost_per_item, F&& fn) {
  if (n <= 0) return;
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads <= 1 || n * std::max<int64_t>(cost_per_item, 1) < 32768 || n == 1) {
    fn(int64_t{0}, n);
    return;
  }
  int64_t chunks = std::min<int64_t>(n, threads);
#pragma omp parallel num_threads(threads)
  {
    // The runtime may give fewer threads than asked (OMP_DYNAMIC, thread limits): each thread
    // takes every team-th chunk.
    for (int64_t c = omp_get_thread_num(); c < chunks; c += omp_get_num_threads()) {
      fn(n * c / chunks, n * (c + 1) / chunks);
    }
  }
}

// fn(i) for each i in [0, n), the items handed to the threads one at a time in order, so the
// early items finish first (work whose results are consumed in order while the rest runs).
template <typename F>
void ParallelForEach(int64_t n, F&& fn) {
  if (n <= 0) return;
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) fn(i);
}

// Sets OpenMP's threads for this thread's later parallel regions (its nthreads ICV) while alive.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int n) : was_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ScopedOmpThreads() { omp_set_num_threads(was_); }
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int was_;
};

}  // namespace rankd
