// OpProfile: optional per-op wall time across all executors, for finding where a model's time goes.
// Off unless RANKD_PROFILE=1 is set in the environment (then each step is timed; small overhead);
// RANKD_PROFILE=steps times each node on its own ("op node-name") instead of per op.
// Thread-safe.
#pragma once

#include <string>

namespace rankd {

class OpProfile {
 public:
  static bool enabled();
  // The name a step's time is recorded under: its op, or with RANKD_PROFILE=steps "op node-name".
  static std::string Key(const std::string& op, const std::string& node);
  static void Record(const std::string& op, double ms);
  // "op  calls  total ms  share" lines, largest first.
  static std::string Report();
};

}  // namespace rankd
