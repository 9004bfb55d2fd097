// Threads that must not slow the request path's front door when the host is short of cores.
//
// RunAtIdlePriority: background threads run only on cores no other thread wants (Linux's
// SCHED_IDLE), and are preempted as soon as one does. A request's host work splits over every core
// in parallel regions (parallel.h), and such a region ends with its slowest thread: a background
// thread busy on one of the cores at normal priority shares that core with the region's thread
// there for whole scheduler slices (on an H200 host, the cache keeper, embedding/cache_keeper.h,
// busy on one of 16 cores made W1's input packing at 32,768 pairs take 2.6 ms instead of 0.8,
// docs/embedding.md).
//
// RaiseNiceness: a thread that does a request's work after the frontends took it (a batcher's
// executor threads) yields to them when every core is busy, at a niceness above theirs (Linux's
// per-thread nice), and runs as usual otherwise. Past a server's capacity the frontends then still
// read and refuse the calls the model cannot take, where at equal priority the executors' work
// kept them from it and calls waited unread for seconds (docs/batching.md).
#pragma once

namespace rankd {

// Lowers the calling thread to idle priority; false where the system has no such policy or
// refuses (the thread then keeps its priority).
bool RunAtIdlePriority();

// Raises the calling thread's niceness by `steps` (to at most 19; higher yields more); false
// where the system refuses (the thread then keeps its own).
bool RaiseNiceness(int steps);

}  // namespace rankd
