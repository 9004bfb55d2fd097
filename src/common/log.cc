#include "common/log.h"

#include <spdlog/logger.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "common/mutex.h"

namespace rankd {
namespace {

struct Log {
  Mutex mu;
  LogSettings settings RANKD_GUARDED_BY(mu);
  std::shared_ptr<spdlog::logger> logger RANKD_GUARDED_BY(mu);
  std::atomic<int> verbose_level{0};  // settings.verbose_level, read without the lock on a request's path
  std::atomic<bool> access{false};    // settings.access, likewise
};

StatusOr<std::shared_ptr<spdlog::logger>> MakeLogger(const LogSettings& s) {
  std::shared_ptr<spdlog::sinks::sink> sink;
  try {
    if (s.file.empty()) {
      sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    } else {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(s.file);
    }
  } catch (const std::exception& e) {
    return InvalidArgument("log_file '" + s.file + "' cannot be opened: " + e.what());
  }
  auto logger = std::make_shared<spdlog::logger>("rankd", std::move(sink));
  // %L: I, W, E or D (a verbose message); %t: the thread.
  if (s.format == "ISO8601") {
    logger->set_pattern("%Y-%m-%dT%H:%M:%SZ %L %t] %v", spdlog::pattern_time_type::utc);
  } else {
    logger->set_pattern("%L%m%d %H:%M:%S.%f %t] %v");
  }
  logger->set_level(spdlog::level::trace);
  logger->flush_on(spdlog::level::trace);  // each line as it is written, as stderr is
  return logger;
}

Log& TheLog() {
  static Log* log = [] {
    auto* l = new Log();  // never destroyed: threads may log while the process exits
    MutexLock lock(l->mu);
    StatusOr<std::shared_ptr<spdlog::logger>> logger = MakeLogger(l->settings);  // stderr: cannot fail
    l->logger = std::move(*logger);
    return l;
  }();
  return *log;
}

void Write(spdlog::level::level_enum level, bool LogSettings::*on, int verbose, std::string_view message) {
  Log& log = TheLog();
  if (!on && verbose > log.verbose_level.load(std::memory_order_relaxed)) return;
  std::shared_ptr<spdlog::logger> logger;
  {
    MutexLock lock(log.mu);
    if (on && !(log.settings.*on)) return;
    if (!on && verbose > log.settings.verbose_level) return;
    logger = log.logger;
  }
  logger->log(level, "{}", message);
}

}  // namespace

LogSettings CurrentLogSettings() {
  Log& log = TheLog();
  MutexLock lock(log.mu);
  return log.settings;
}

Status ApplyLogSettings(const LogSettings& settings) {
  if (settings.format != "default" && settings.format != "ISO8601") {
    return InvalidArgument("log_format must be default or ISO8601, not '" + settings.format + "'");
  }
  if (settings.verbose_level < 0) return InvalidArgument("log_verbose_level must be 0 or more");
  Log& log = TheLog();
  MutexLock lock(log.mu);
  if (settings.file != log.settings.file || settings.format != log.settings.format) {
    RANKD_ASSIGN_OR_RETURN(log.logger, MakeLogger(settings));
  }
  log.settings = settings;
  log.verbose_level = settings.verbose_level;
  log.access = settings.access;
  return Status::Ok();
}

void LogInfo(std::string_view message) { Write(spdlog::level::info, &LogSettings::info, 0, message); }
void LogWarning(std::string_view message) { Write(spdlog::level::warn, &LogSettings::warning, 0, message); }
void LogError(std::string_view message) { Write(spdlog::level::err, &LogSettings::error, 0, message); }
void LogVerbose(int level, std::string_view message) { Write(spdlog::level::debug, nullptr, level, message); }

bool LogVerboseOn(int level) { return level <= TheLog().verbose_level.load(std::memory_order_relaxed); }

bool LogAccessOn() { return TheLog().access.load(std::memory_order_relaxed); }

void LogAccess(std::string_view message) {
  Log& log = TheLog();
  std::shared_ptr<spdlog::logger> logger;
  {
    MutexLock lock(log.mu);
    if (!log.settings.access) return;
    logger = log.logger;
  }
  logger->log(spdlog::level::info, "A {}", message);  // an info line marked as the access log's
}

}  // namespace rankd
