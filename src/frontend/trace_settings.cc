#include "frontend/trace_settings.h"

namespace rankd {

StatusOr<RequestTracer::Update> TraceUpdateFromJson(const nlohmann::json& body) {
  if (!body.is_object()) return InvalidArgument("trace settings are a JSON object of setting: value");
  RequestTracer::Update update;
  for (const auto& [name, value] : body.items()) {
    if (value.is_null()) {
      update[name] = std::nullopt;
    } else if (value.is_string()) {
      update[name] = std::vector<std::string>{value.get<std::string>()};
    } else if (value.is_array() &&
               std::all_of(value.begin(), value.end(), [](const auto& v) { return v.is_string(); })) {
      update[name] = value.get<std::vector<std::string>>();
    } else {
      return InvalidArgument("trace setting '" + name + "' takes a string, an array of strings or null");
    }
  }
  return update;
}

nlohmann::json TraceSettingsJson(const RequestTracer::Settings& settings) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, values] : settings) {
    if (name == "trace_level") {
      out[name] = values;
    } else {
      out[name] = values.empty() ? "" : values[0];
    }
  }
  return out;
}

}  // namespace rankd
