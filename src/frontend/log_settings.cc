#include "frontend/log_settings.h"

namespace rankd {

std::vector<std::pair<std::string, LogSettingValue>> LogSettingValues(const LogSettings& s) {
  return {{"log_file", s.file},
          {"log_info", s.info},
          {"log_warning", s.warning},
          {"log_error", s.error},
          {"log_verbose_level", int64_t{s.verbose_level}},
          {"log_format", s.format},
          {"log_access", s.access}};
}

Status SetLogSetting(LogSettings& s, const std::string& key, const LogSettingValue& value) {
  auto need = [&](const char* type) { return InvalidArgument("log setting '" + key + "' takes " + type); };
  if (key == "log_file" || key == "log_format") {
    const auto* text = std::get_if<std::string>(&value);
    if (!text) return need("a string");
    (key == "log_file" ? s.file : s.format) = *text;
    return Status::Ok();
  }
  if (key == "log_info" || key == "log_warning" || key == "log_error" || key == "log_access") {
    const auto* on = std::get_if<bool>(&value);
    if (!on) return need("true or false");
    (key == "log_info" ? s.info : key == "log_warning" ? s.warning : key == "log_error" ? s.error : s.access) = *on;
    return Status::Ok();
  }
  if (key == "log_verbose_level") {
    const auto* level = std::get_if<int64_t>(&value);
    if (!level || *level < 0 || *level > 1000000) return need("a non-negative integer");
    s.verbose_level = static_cast<int>(*level);
    return Status::Ok();
  }
  return InvalidArgument("unknown log setting '" + key +
                         "' (log_file, log_info, log_warning, log_error, log_verbose_level, log_format, log_access)");
}

}  // namespace rankd
