// ParallelFor: splits [0, n) into contiguous chunks over the CPU backend's threads (OpenMP).
// Runs inline when the work is small (n * cost_per_item under ~32k units) or already inside a
// parallel region. `fn(begin, end)` must be safe to call concurrently on disjoint ranges.
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
#pragma omp parallel for num_threads(static_cast <int>(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    fn(begin, end);
  }
}

// fn(i) for each i in [0, n), the items handed to the threads one at a time in order, so the
// early items finish first (work whose results are consumed in order while the rest runs).
template <typename F>
void ParallelForEach(int64_t n, F&& fn) {
  if (n <= 0) return;
  int threads = omp_in_parallel() ? 1 : static_cast<int>(std::min<int64_t>(n, omp_get_max_threads()));
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) fn(i);
}

}  // namespace rankd
