#include "runtime/op_profile.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/mutex.h"

namespace rankd {
namespace {

struct Table {
  Mutex mu;
  std::map<std::string, std::pair<int64_t, double>> by_op RANKD_GUARDED_BY(mu);  // calls, ms
};

Table& table() {
  static Table t;
  return t;
}

using Mode = OpProfile::Mode;

std::atomic<Mode> mode{Mode::kOff};

Mode ProfileMode() { return mode.load(std::memory_order_relaxed); }

}  // namespace

void OpProfile::SetMode(Mode m) { mode.store(m); }

StatusOr<OpProfile::Mode> OpProfile::ParseMode(const std::string& name) {
  if (name == "off") return Mode::kOff;
  if (name == "ops") return Mode::kByOp;
  if (name == "steps") return Mode::kByStep;
  if (name == "host") return Mode::kHost;
  return InvalidArgument("unknown profile '" + name + "' (expected off, ops, steps or host)");
}

bool OpProfile::enabled() { return ProfileMode() == Mode::kByOp || ProfileMode() == Mode::kByStep; }

bool OpProfile::phases() { return ProfileMode() != Mode::kOff; }

std::string OpProfile::Key(const std::string& op, const std::string& node) {
  return ProfileMode() == Mode::kByStep ? op + " " + node : op;
}

void OpProfile::Record(const std::string& op, double ms) {
  Table& t = table();
  MutexLock lock(t.mu);
  auto& e = t.by_op[op];
  ++e.first;
  e.second += ms;
}

void OpProfile::RecordSince(const std::string& op, std::chrono::steady_clock::time_point start) {
  Record(op, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
}

void OpProfile::Reset() {
  Table& t = table();
  MutexLock lock(t.mu);
  t.by_op.clear();
}

std::string OpProfile::Report() {
  Table& t = table();
  MutexLock lock(t.mu);
  std::vector<std::pair<std::string, std::pair<int64_t, double>>> rows(t.by_op.begin(), t.by_op.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  double total = 0;
  for (const auto& r : rows) total += r.second.second;
  std::string out;
  char line[320];
  for (const auto& [op, stat] : rows) {
    std::snprintf(line, sizeof line, "%-22s %8lld calls %10.3f ms %5.1f%% %9.4f ms per call\n", op.c_str(),
                  static_cast<long long>(stat.first), stat.second, total > 0 ? 100.0 * stat.second / total : 0.0,
                  stat.first > 0 ? stat.second / static_cast<double>(stat.first) : 0.0);
    out += line;
  }
  return out;
}

}  // namespace rankd
