#include "frontend/http_api.h"

#include <charconv>
#include <chrono>

#include <nlohmann/json.hpp>

#include "frontend/base64.h"
#include "frontend/http_compression.h"
#include "frontend/log_settings.h"
#include "frontend/trace_settings.h"
#include "frontend/triton_config.h"
#include "frontend/triton_stats.h"

namespace rankd {
namespace {

using nlohmann::json;

constexpr const char* kServerVersion = "0.1.0";

HttpResponse Json(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

HttpResponse Error(const Status& s) {
  HttpResponse r;
  r.status = HttpStatusFor(s.code());
  r.body = ErrorJson(s.message());
  return r;
}

PathSegments SplitPath(std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  PathSegments parts;
  size_t start = 1;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash > start) parts.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

// A load request's body: none, or {"parameters": {"config": "<Triton's ModelConfig as JSON>"}}.
StatusOr<std::string> LoadConfigOverride(const std::string& body) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return std::string();
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("the load request's body is not a JSON object");
  if (!j.contains("parameters")) return std::string();
  const json& p = j["parameters"];
  if (!p.is_object()) return InvalidArgument("the load request's parameters must be an object");
  std::string config;
  for (const auto& [key, value] : p.items()) {
    if (key != "config") return Unimplemented("load parameter '" + key + "' is not supported (only 'config')");
    if (!value.is_string())
      return InvalidArgument("load parameter 'config' must be a string (Triton's model configuration as JSON)");
    config = value.get<std::string>();
  }
  return config;
}

}  // namespace

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kUnimplemented:
      return 400;
    case StatusCode::kResourceExhausted:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

void HttpApi::Handle(const HttpRequest& request, HttpRespond respond) {
  if (auto accept = request.headers.find("accept-encoding"); accept != request.headers.end()) {
    if (std::string encoding = ChooseEncoding(accept->second); !encoding.empty()) {
      respond = [encoding, respond = std::move(respond)](HttpResponse r) {
        if (StatusOr<std::string> packed = EncodeBody(encoding, r.body); packed.ok()) {
          r.body = std::move(*packed);
          r.headers.push_back({"Content-Encoding", encoding});
        }
        respond(std::move(r));
      };
    }
  }
  auto coding = request.headers.find("content-encoding");
  if (coding == request.headers.end()) return Route(request, std::move(respond));
  StatusOr<std::string> body = DecodeBody(coding->second, request.body, limits_.max_body_bytes);
  if (!body.ok()) {
    HttpResponse r = Error(body.status());
    if (body.status().code() == StatusCode::kUnimplemented) r.status = 415;  // Unsupported Media Type
    return respond(std::move(r));
  }
  HttpRequest decoded = request;  // the handlers read it before Route returns
  decoded.body = std::move(*body);
  decoded.headers.erase("content-encoding");
  Route(decoded, std::move(respond));
}

namespace {

// POST /v2/models/NAME[/versions/V]/infer (`p`: the target's segments).
bool IsInferPath(const HttpRequest& request, const PathSegments& p) {
  return request.method == "POST" && p.size() >= 4 && p[0] == "v2" && p[1] == "models" && p.back() == "infer" &&
         (p.size() == 4 || (p.size() == 6 && p[3] == "versions"));
}

// The version an inference path names (segment 4 of .../versions/V/infer), or -1 for none.
StatusOr<int64_t> InferVersion(const PathSegments& p) {
  return p.size() == 6 ? ParseModelVersion(std::string(p[4])) : StatusOr<int64_t>(int64_t{-1});
}

// The restricted-API category of a route (restricted_apis.h), or nullopt for a path of none.
std::optional<ApiCategory> CategoryOf(const PathSegments& p) {
  if (p.empty() || p[0] != "v2") return std::nullopt;
  if (p.size() == 1) return ApiCategory::kMetadata;
  const std::string_view area = p[1];
  if (area == "health") return ApiCategory::kHealth;
  if (area == "repository") return ApiCategory::kModelRepository;
  if (area == "systemsharedmemory" || area == "cudasharedmemory") return ApiCategory::kSharedMemory;
  if (area == "logging") return ApiCategory::kLogging;
  if (area == "trace") return ApiCategory::kTrace;
  if (area != "models") return std::nullopt;
  const std::string_view last = p.back();
  if (p.size() > 4 && last == "setting" && p[p.size() - 2] == "trace") return ApiCategory::kTrace;
  if (p.size() > 2 && last == "infer") return ApiCategory::kInference;
  if (p.size() > 2 && last == "ready") return ApiCategory::kHealth;
  if (p.size() > 2 && last == "config") return ApiCategory::kModelConfig;
  if (p.size() > 2 && last == "stats") return ApiCategory::kStatistics;
  return ApiCategory::kMetadata;
}

}  // namespace

void HttpApi::Route(const HttpRequest& request, HttpRespond respond) {
  const PathSegments p = SplitPath(request.target);
  if (std::optional<ApiCategory> category = CategoryOf(p)) {
    auto refusal = restricted_.Refusal(*category, [&](const std::string& key) -> std::optional<std::string> {
      auto it = request.headers.find(key);
      return it == request.headers.end() ? std::nullopt : std::optional<std::string>(it->second);
    });
    if (refusal) {
      HttpResponse forbidden;
      forbidden.status = 403;
      forbidden.body = ErrorJson(*refusal);
      return respond(std::move(forbidden));
    }
  }
  if (!IsInferPath(request, p)) return respond(Answer(request, p));
  StatusOr<int64_t> version = InferVersion(p);
  if (!version.ok()) return respond(Error(version.status()));
  Infer(request, p[2], *version, std::move(respond));
}

bool HttpApi::HandlesAtOnce(const HttpRequest& request) const {
  if (request.body.size() + request.binary.size() > kAtOnceBodyBytes) return false;
  if (request.headers.count("content-encoding")) return false;  // inflated first: the worker's work
  const PathSegments p = SplitPath(request.target);
  if (!IsInferPath(request, p)) return false;
  StatusOr<int64_t> version = InferVersion(p);
  if (!version.ok()) return true;  // answered at once with the error
  StatusOr<std::shared_ptr<const Model>> model = repository_.Get(p[2], *version);
  // An unknown model is answered at once; one without batching runs on its caller's thread.
  return !model.ok() || (*model)->batch_policy() != nullptr;
}

HttpResponse HttpApi::Answer(const HttpRequest& request, const PathSegments& p) {
  const std::string& m = request.method;
  if (p.empty() || p[0] != "v2") return Error(NotFound("no route for " + m + " " + request.target));
  if (p.size() == 1 && m == "GET") {
    return Json(200, {{"name", "rankd"},
                      {"version", kServerVersion},
                      {"extensions",
                       {"model_repository", "binary_tensor_data", "model_configuration", "statistics",
                        "system_shared_memory", "cuda_shared_memory", "logging", "trace"}}});
  }
  if (p.size() == 3 && p[1] == "health" && m == "GET") {
    if (p[2] == "live") {
      Status live = probes_.live();
      return live.ok() ? Json(200, json::object()) : Error(live);
    }
    if (p[2] == "ready") {
      Status ready = shutting_down_ ? Unavailable("the server is shutting down") : probes_.ready();
      return ready.ok() ? Json(200, json::object()) : Error(ready);
    }
  }
  if (p.size() == 3 && p[1] == "models" && p[2] == "stats" && m == "GET") return Statistics("", -1);
  if (p.size() >= 3 && p[1] == "models") {
    const std::string name(p[2]);
    size_t rest = 3;
    int64_t version = -1;
    if (p.size() >= 5 && p[3] == "versions") {
      auto v = ParseModelVersion(std::string(p[4]));
      if (!v.ok()) return Error(v.status());
      version = *v;
      rest = 5;
    }
    if (p.size() == rest && m == "GET") return ModelMetadata(name, version);
    if (p.size() == 5 && rest == 3 && p[3] == "trace" && p[4] == "setting") return TraceSetting(request, name);
    if (p.size() == rest + 1 && p[rest] == "stats" && m == "GET") return Statistics(name, version);
    if (p.size() == rest + 1 && p[rest] == "config" && m == "GET") {
      auto model = repository_.Get(name, version);
      if (!model.ok()) return Error(model.status());
      return Json(200, ProtoToJson(TritonModelConfig(**model)));
    }
    if (p.size() == rest + 1 && p[rest] == "ready" && m == "GET") {
      auto model = repository_.Get(name, version);
      Status ready = model.ok() ? (*model)->CheckServable() : model.status();
      return ready.ok() ? Json(200, json::object()) : Error(ready);
    }
  }
  if (p.size() >= 3 && (p[1] == "systemsharedmemory" || p[1] == "cudasharedmemory")) return SharedMemory(request, p);
  if (p.size() == 2 && p[1] == "logging" && (m == "GET" || m == "POST")) return Logging(request);
  if (p.size() == 3 && p[1] == "trace" && p[2] == "setting") return TraceSetting(request, "");
  if (p.size() == 3 && p[1] == "repository" && p[2] == "index" && m == "POST") {
    json index = json::array();
    for (const RepositoryIndexEntry& e : repository_.Index()) {
      json entry = {{"name", e.name}, {"state", e.state}, {"reason", e.reason}};
      if (e.version >= 0) entry["version"] = std::to_string(e.version);
      index.push_back(entry);
    }
    return Json(200, index);
  }
  if (p.size() == 5 && p[1] == "repository" && p[2] == "models" && m == "POST" &&
      (p[4] == "load" || p[4] == "unload")) {
    if (p[4] == "unload") {
      Status s = repository_.Unload(std::string(p[3]));
      return s.ok() ? Json(200, json::object()) : Error(s);
    }
    StatusOr<std::string> config = LoadConfigOverride(request.body);
    if (!config.ok()) return Error(config.status());
    Status s = repository_.Load(std::string(p[3]), *config);
    return s.ok() ? Json(200, json::object()) : Error(s);
  }
  return Error(NotFound("no route for " + m + " " + request.target));
}

// GET /v2/logging: the log settings; POST: changes those the body names, answers the new ones.
HttpResponse HttpApi::Logging(const HttpRequest& request) {
  LogSettings settings = CurrentLogSettings();
  if (request.method == "POST") {
    json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object()) return Error(InvalidArgument("the log settings must be a JSON object"));
    for (const auto& [key, v] : body.items()) {
      LogSettingValue value;
      if (v.is_boolean()) {
        value = v.get<bool>();
      } else if (v.is_number_integer()) {
        value = v.get<int64_t>();
      } else if (v.is_string()) {
        value = v.get<std::string>();
      } else {
        return Error(InvalidArgument("log setting '" + key + "' must be a string, a boolean or an integer"));
      }
      if (Status s = SetLogSetting(settings, key, value); !s.ok()) return Error(s);
    }
    if (Status s = ApplyLogSettings(settings); !s.ok()) return Error(s);
  }
  json out = json::object();
  for (const auto& setting : LogSettingValues(settings)) {
    std::visit([&](const auto& v) { out[setting.first] = v; }, setting.second);
  }
  return Json(200, out);
}

// GET  /v2/systemsharedmemory[/region/NAME]/status
// POST /v2/systemsharedmemory/region/NAME/register  {"key", "offset", "byte_size"}
// POST /v2/systemsharedmemory[/region/NAME]/unregister
// and the same under /v2/cudasharedmemory, registering {"raw_handle": {"b64"}, "device_id", "byte_size"}
HttpResponse HttpApi::SharedMemory(const HttpRequest& request, const PathSegments& p) {
  const bool region = p.size() == 5 && p[2] == "region";
  if (p.size() != 3 && !region) return Error(NotFound("no route for " + request.method + " " + request.target));
  const bool cuda = p[1] == "cudasharedmemory";
  const auto kind = cuda ? SharedMemoryRegions::Kind::kCuda : SharedMemoryRegions::Kind::kSystem;
  const std::string name = region ? std::string(p[3]) : std::string();
  const std::string_view action = p.back();
  if (action == "status" && request.method == "GET") {
    auto regions = shared_memory_.List(kind, name);
    if (!regions.ok()) return Error(regions.status());
    json out = json::array();
    for (const SharedMemoryRegions::RegionStatus& r : *regions) {
      if (cuda) {
        out.push_back({{"name", r.name}, {"device_id", r.device_id}, {"byte_size", r.byte_size}});
      } else {
        out.push_back({{"name", r.name}, {"key", r.key}, {"offset", r.offset}, {"byte_size", r.byte_size}});
      }
    }
    return Json(200, out);
  }
  if (action == "unregister" && request.method == "POST") {
    Status s = shared_memory_.Unregister(kind, name);
    return s.ok() ? Json(200, json::object()) : Error(s);
  }
  if (action == "register" && region && request.method == "POST") {
    json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (cuda) {
      const json* handle = body.is_object() && body.contains("raw_handle") ? &body["raw_handle"] : nullptr;
      std::optional<std::string> bytes;
      if (handle && handle->is_object() && handle->contains("b64") && (*handle)["b64"].is_string()) {
        bytes = DecodeBase64((*handle)["b64"].get<std::string>());
      }
      if (!bytes || !body.value("device_id", json(0)).is_number_integer() || !body.contains("byte_size") ||
          !body["byte_size"].is_number_unsigned()) {
        return Error(InvalidArgument(
            "a CUDA shared memory registration is {\"raw_handle\": {\"b64\": base64 string}, \"device_id\": "
            "integer, \"byte_size\": integer}"));
      }
      Status s = shared_memory_.RegisterCuda(name, *bytes, body.value("device_id", json(0)).get<int64_t>(),
                                             body["byte_size"].get<uint64_t>());
      return s.ok() ? Json(200, json::object()) : Error(s);
    }
    if (!body.is_object() || !body.contains("key") || !body["key"].is_string() ||
        !body.value("offset", json(0)).is_number_unsigned() || !body.contains("byte_size") ||
        !body["byte_size"].is_number_unsigned()) {
      return Error(InvalidArgument(
          "a shared memory registration is {\"key\": string, \"offset\": integer, \"byte_size\": integer}"));
    }
    Status s = shared_memory_.Register(name, body["key"], body.value("offset", json(0)).get<uint64_t>(),
                                       body["byte_size"].get<uint64_t>());
    return s.ok() ? Json(200, json::object()) : Error(s);
  }
  return Error(NotFound("no route for " + request.method + " " + request.target));
}

// GET|POST /v2[/models/NAME]/trace/setting
HttpResponse HttpApi::TraceSetting(const HttpRequest& request, const std::string& model) {
  RequestTracer* tracer = service_.tracer();
  if (!tracer) return Error(Unimplemented("tracing is not served here"));
  if (!model.empty()) {
    if (Status known = repository_.Get(model, -1).status(); !known.ok()) return Error(known);
  }
  if (request.method == "POST") {
    json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    StatusOr<RequestTracer::Update> update = TraceUpdateFromJson(body);
    if (!update.ok()) return Error(update.status());
    if (Status s = tracer->Apply(model, *update); !s.ok()) return Error(s);
  } else if (request.method != "GET") {
    return Error(NotFound("no route for " + request.method + " " + request.target));
  }
  return Json(200, TraceSettingsJson(tracer->Current(model)));
}

HttpResponse HttpApi::Statistics(const std::string& name, int64_t version) {
  auto stats = TritonStatistics(repository_, service_.metrics(), name, version);
  return stats.ok() ? Json(200, ProtoToJson(*stats)) : Error(stats.status());
}

HttpResponse HttpApi::ModelMetadata(const std::string& name, int64_t version) {
  auto model = repository_.Get(name, version);
  if (!model.ok()) return Error(model.status());
  json inputs = json::array(), outputs = json::array();
  for (const InputSignature& in : (*model)->inputs()) {
    json shape = json::array({-1});
    for (int64_t d : in.dims) shape.push_back(d);
    json entry = {{"name", in.name}, {"datatype", in.datatype()}, {"shape", shape}};
    json params = json::object();
    if (in.user_scope) params["scope"] = "user";
    if (in.ragged) {
      params["ragged"] = true;
      params["max_length"] = in.max_length;
      params["lengths_input"] = in.name + std::string(kLengthsTensorSuffix);  // or the lengths parameter
    }
    if (!params.empty()) entry["parameters"] = params;
    inputs.push_back(entry);
  }
  for (const OutputSignature& out : (*model)->outputs()) {
    json shape = json::array({-1});
    for (int64_t d : out.dims) shape.push_back(d);
    outputs.push_back({{"name", out.name}, {"datatype", DTypeName(out.dtype)}, {"shape", shape}});
  }
  return Json(200, {{"name", name},
                    {"versions", {std::to_string((*model)->version())}},
                    {"platform", "onnx"},
                    {"inputs", inputs},
                    {"outputs", outputs}});
}

void HttpApi::Infer(const HttpRequest& request, std::string_view name, int64_t version, HttpRespond respond) {
  if (max_queue_wait_.count() > 0) {
    const auto waited =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - request.received);
    if (waited > max_queue_wait_) {
      service_.metrics().RecordOverloadRefusal();
      return respond(
          Error(Unavailable("the server is overloaded: the request waited " + std::to_string(waited.count() / 1000) +
                            " ms to be handled (at most " + std::to_string(max_queue_wait_.count() / 1000) + ")")));
    }
  }
  // What the answer needs of the request (which outputs go binary), and the answer being built.
  struct Answer {
    bool binary_all = false;
    std::vector<std::string> binary_outputs;
    std::vector<SharedMemoryOutput> regions;
    std::vector<SharedMemoryRegions::Use> read_in_place;  // checked before answering
    HttpResponse response;
  };
  auto answer = std::make_shared<Answer>();
  // The body is split and parsed inside the service, so a malformed one counts as the model's failure.
  service_.InferAsync(
      name, version, request.received,
      [&](const Model&) -> StatusOr<ParsedRequest> {
        RANKD_ASSIGN_OR_RETURN(BinaryBody parts, SplitBinaryBody(request));
        RANKD_ASSIGN_OR_RETURN(ParsedInferRequest parsed,
                               ParseInferRequest(parts.json, parts.binary, limits_, &shared_memory_));
        answer->binary_all = parsed.binary_output_all;
        answer->binary_outputs = std::move(parsed.binary_outputs);
        answer->regions = std::move(parsed.shared_memory_outputs);
        answer->read_in_place = std::move(parsed.shared_memory_inputs);
        return static_cast<ParsedRequest&&>(std::move(parsed));
      },
      [answer](const Model& model, const InferRequest& r, const std::vector<InferOutput>& outputs) {
        HttpResponse& response = answer->response;
        Status written = CheckSharedMemoryInputs(answer->read_in_place);
        if (written.ok()) written = WriteSharedMemoryOutputs(outputs, answer->regions);
        if (!written.ok()) {
          response = Error(written);
          return;
        }
        InferResponseBody out = MakeInferResponse(model.name(), model.version(), r.id, outputs, answer->binary_all,
                                                  answer->binary_outputs, answer->regions);
        response.body = std::move(out.body);
        if (out.binary) {
          response.content_type = "application/octet-stream";
          response.headers.push_back({"Inference-Header-Content-Length", std::to_string(out.json_length)});
        }
      },
      [answer, respond = std::move(respond)](const Status& s) {
        respond(s.ok() ? std::move(answer->response) : Error(s));
      },
      /*run_here_when_idle=*/!request.on_io_thread);
}

StatusOr<BinaryBody> SplitBinaryBody(const HttpRequest& request) {
  if (!request.binary.pieces.empty()) return BinaryBody{request.body, request.binary};  // the server split it
  BinaryBody parts{request.body, BinaryPieces()};
  auto header = request.headers.find("inference-header-content-length");
  if (header == request.headers.end()) return parts;
  const std::string& text = header->second;
  uint64_t length = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), length);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return InvalidArgument("Inference-Header-Content-Length '" + text + "' is not a non-negative integer");
  }
  if (length > parts.json.size()) {
    return InvalidArgument("Inference-Header-Content-Length " + text + " exceeds the body's " +
                           std::to_string(parts.json.size()) + " bytes");
  }
  parts.binary = BinaryPieces::Contiguous(parts.json.substr(length));
  parts.json = parts.json.substr(0, length);
  return parts;
}

}  // namespace rankd
