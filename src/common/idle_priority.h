// Background threads that must not slow requests: the calling thread runs only on cores no
// other thread wants (Linux's SCHED_IDLE), and is preempted as soon as one does.
//
// Why it matters: a request's host work splits over every core in parallel regions (parallel.h),
// and such a region ends with its slowest thread. A background thread busy on one of the cores
// at normal priority shares that core with the region's thread there for whole scheduler slices:
// on an H200 host, the cache keeper (embedding/cache_keeper.h) busy on one of 16 cores made W1's
// input packing at 32,768 pairs take 2.6 ms instead of 0.8 (docs/embedding.md).
#pragma once

namespace rankd {

// Lowers the calling thread to idle priority; false where the system has no such policy or
// refuses (the thread then keeps its priority).
bool RunAtIdlePriority();

}  // namespace rankd
