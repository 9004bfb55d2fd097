// What the health endpoints answer: HTTP's /v2/health/live and /v2/health/ready, gRPC's
// ServerLive and ServerReady. OK, or Unavailable saying why not (HTTP's 503 carries the reason).
#pragma once

#include <functional>

#include "rankd/status.h"

namespace rankd {

struct HealthProbes {
  // False once the process cannot serve again without a restart (a poisoned GPU), so that a
  // liveness probe restarts it.
  std::function<Status()> live = [] { return Status::Ok(); };
  // False while live is, while draining, and under --strict-readiness while a wanted model is not
  // ready.
  std::function<Status()> ready = [] { return Status::Ok(); };
};

}  // namespace rankd
