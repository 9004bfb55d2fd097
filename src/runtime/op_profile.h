// OpProfile: optional per-op wall time across all executors, for finding where a model's time goes.
// Off unless a mode is set (rankd's `--profile`): `ops` times each step (small overhead) per op;
// `steps` times each node on its own ("op node-name") instead; `host` times only a request's host
// phases (graph inputs, padding, packing, waiting for the device, outputs) and the device's span
// per run, leaving steps untimed and captured graphs on, so the split is that of a normal run. The
// host phases are timed in every mode but off. Thread-safe.
#pragma once

#include <chrono>
#include <string>

#include "rankd/status.h"

namespace rankd {

class OpProfile {
 public:
  enum class Mode { kOff, kByOp, kByStep, kHost };
  static void SetMode(Mode mode);
  // "off", "ops", "steps" or "host".
  static StatusOr<Mode> ParseMode(const std::string& name);
  // Steps are timed (ops or steps): each is synchronised, and graphs are off.
  static bool enabled();
  // A request's host phases are timed (any mode but off).
  static bool phases();
  // The name a step's time is recorded under: its op, or in steps mode "op node-name".
  static std::string Key(const std::string& op, const std::string& node);
  static void Record(const std::string& op, double ms);
  // Records the milliseconds from `start` to now.
  static void RecordSince(const std::string& op, std::chrono::steady_clock::time_point start);
  // Forgets what was recorded (a benchmark's warm-up).
  static void Reset();
  // "op  calls  total ms  share  ms per call" lines, largest first.
  static std::string Report();
};

// Times a host phase from its making to its end, or to Stop(), where phases are timed.
class PhaseTimer {
 public:
  explicit PhaseTimer(const char* op) : op_(OpProfile::phases() ? op : nullptr) {
    if (op_) start_ = std::chrono::steady_clock::now();
  }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;
  ~PhaseTimer() { Stop(); }
  void Stop() {
    if (op_) OpProfile::RecordSince(op_, start_);
    op_ = nullptr;
  }

 private:
  const char* op_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace rankd
