// OpProfile: optional per-op wall time across all executors, for finding where a model's time goes.
// Off unless RANKD_PROFILE=1 is set in the environment (then each step is timed; small overhead).
// Thread-safe.
#pragma once

#include <string>

namespace rankd {

class OpProfile {
 public:
  static bool enabled();
  static void Record(const std::string& op, double ms);
  // "op  calls  total ms  share" lines, largest first.
  static std::string Report();
};

}  // namespace rankd
