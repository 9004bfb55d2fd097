// Triton's logging extension (HTTP GET/POST /v2/logging, gRPC LogSettings): the server's log
// settings (common/log.h) under Triton's names, read and changed one named value at a time.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "common/log.h"
#include "rankd/status.h"

namespace rankd {

using LogSettingValue = std::variant<bool, int64_t, std::string>;

// log_file (string), log_info, log_warning, log_error (bool), log_verbose_level (integer),
// log_format (string), in that order.
std::vector<std::pair<std::string, LogSettingValue>> LogSettingValues(const LogSettings& settings);

// Sets `key` of `settings`. Errors: an unknown key, a value of another type than the key takes.
Status SetLogSetting(LogSettings& settings, const std::string& key, const LogSettingValue& value);

}  // namespace rankd
