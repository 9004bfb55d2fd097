// gRPC's locks are Abseil's (absl::Mutex). Debian builds Abseil without NDEBUG, which leaves its
// lock-order deadlock detection on in every process that links it: each lock and unlock then
// records the locks the thread holds in a process-wide graph of lock ids, under one global lock
// shared by every thread (served W2 over gRPC on an H200 host: 8.4% of the server's samples in
// Abseil's synchronisation and graph-cycles libraries, docs/log/benchmarks.md, "gRPC's locks
// without Abseil's deadlock detection"). Release builds of Abseil have no such detector; rankd
// turns it off before it starts gRPC, as a server or as a load-generating client.
#pragma once

namespace rankd {

// Turns Abseil's deadlock detection off for the whole process (idempotent, thread-safe).
void TurnOffMutexDeadlockDetection();

}  // namespace rankd
