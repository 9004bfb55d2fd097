// The server's log, with the settings of Triton's logging extension (GET/POST /v2/logging, gRPC
// LogSettings): info, warning and error messages, each kind on or off, and verbose messages up to
// a level, written to stderr or to a file, each line prefixed in Triton's default form
// ("I1129 14:30:00.123456 4242] message": kind, month and day, time, thread) or with an ISO 8601
// UTC time. spdlog writes them. Thread-safe; settings apply to the messages after the change.
#pragma once

#include <string>
#include <string_view>

#include "rankd/status.h"

namespace rankd {

struct LogSettings {
  std::string file;  // empty: stderr
  bool info = true, warning = true, error = true;
  int verbose_level = 0;           // verbose messages of this level and below are written; 0: none
  std::string format = "default";  // default | ISO8601
  bool access = false;             // one line per HTTP request and gRPC call answered (LogAccess)
};

LogSettings CurrentLogSettings();
// Errors: a format other than default or ISO8601, a negative verbose level, a file that cannot be
// opened for appending (the settings then stay as they were).
Status ApplyLogSettings(const LogSettings& settings);

void LogInfo(std::string_view message);
void LogWarning(std::string_view message);
void LogError(std::string_view message);
void LogVerbose(int level, std::string_view message);
// Whether verbose messages of `level` are written now (to skip building one that would not be).
bool LogVerboseOn(int level);
// The access log: a line per answered request, kind A, written while `access` is on (whatever
// the other kinds' settings); LogAccessOn says whether to build one.
void LogAccess(std::string_view message);
bool LogAccessOn();

}  // namespace rankd
