#include "frontend/restricted_apis.h"

#include <algorithm>
#include <cctype>

namespace rankd {
namespace {

constexpr std::string_view kNames[] = {"health",           "metadata",   "inference", "shared-memory", "model-config",
                                       "model-repository", "statistics", "trace",     "logging"};

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

Status RestrictedApis::Add(std::string_view spec) {
  const size_t colon = spec.find(':');
  const size_t equals = colon == std::string_view::npos ? colon : spec.find('=', colon);
  if (colon == std::string_view::npos || equals == std::string_view::npos || equals == colon + 1) {
    return InvalidArgument("a restriction is CATEGORY[,CATEGORY...]:KEY=VALUE, not '" + std::string(spec) + "'");
  }
  const std::string key = Lower(spec.substr(colon + 1, equals - colon - 1));
  const std::string value(spec.substr(equals + 1));
  std::string_view categories = spec.substr(0, colon);
  while (!categories.empty()) {
    const size_t comma = categories.find(',');
    const std::string_view name = categories.substr(0, comma);
    const auto* at = std::find(std::begin(kNames), std::end(kNames), name);
    if (at == std::end(kNames)) {
      return InvalidArgument("unknown API category '" + std::string(name) +
                             "' (health, metadata, inference, shared-memory, model-config, model-repository, "
                             "statistics, trace, logging)");
    }
    Rule& rule = rules_[static_cast<size_t>(at - std::begin(kNames))];
    if (!rule.key.empty()) return InvalidArgument("API category '" + std::string(name) + "' is restricted twice");
    rule = {key, value};
    categories = comma == std::string_view::npos ? std::string_view() : categories.substr(comma + 1);
  }
  return Status::Ok();
}

std::optional<std::string> RestrictedApis::Refusal(
    ApiCategory category, const std::function<std::optional<std::string>(const std::string&)>& header) const {
  const Rule& rule = rules_[static_cast<size_t>(category)];
  if (rule.key.empty()) return std::nullopt;
  const std::optional<std::string> given = header(rule.key);
  if (given && *given == rule.value) return std::nullopt;
  return "This API is restricted, expecting header '" + rule.key + "'";
}

}  // namespace rankd
