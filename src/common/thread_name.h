// Names the calling thread (Linux's 15 characters), so that `top -H`, `ps -L`, perf and
// /proc/PID/task/*/comm tell rankd's threads apart: rankd-batch (a batcher's executors),
// rankd-call (gRPC's call queue), rankd-grpc (completion queues), rankd-http (HTTP's event loops),
// rankd-httpwork (HTTP's workers), rankd-poller (the device wait), rankd-help (the helping pool),
// rankd-cache (a table cache's keeper), rankd-capture, rankd-health (gRPC's health service).
// bench/load_bench.py counts the server's context switches by these names.
#pragma once

#include <pthread.h>

#include <string>

namespace rankd {

inline void NameThisThread(const std::string& name) {
  (void)pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace rankd
