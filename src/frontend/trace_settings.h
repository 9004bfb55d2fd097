// Triton's trace extension on the wire (serving/request_tracer.h holds the settings): a JSON body
// of settings, each a string, an array of strings or null (dropping a model's override), and the
// answer with every setting (trace_level as an array, the others as strings).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "serving/request_tracer.h"

namespace rankd {

// The update a POST body asks for. Errors: a body that is not an object, a value of another type.
StatusOr<RequestTracer::Update> TraceUpdateFromJson(const nlohmann::json& body);
nlohmann::json TraceSettingsJson(const RequestTracer::Settings& settings);

}  // namespace rankd
