#include "serving/request_tracer.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "rankd/dtype.h"

namespace rankd {
namespace {

const char* const kNames[] = {"trace_level", "trace_rate", "trace_count", "log_frequency", "trace_file"};

std::optional<int64_t> ParseInt(const std::string& s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// Checks one setting's values; the error names it.
Status CheckSetting(const std::string& name, const std::vector<std::string>& values) {
  if (name == "trace_level") {
    if (values.empty()) return InvalidArgument("trace_level needs a level (OFF, TIMESTAMPS or TENSORS)");
    for (const std::string& v : values) {
      if (v != "OFF" && v != "TIMESTAMPS" && v != "TENSORS")
        return InvalidArgument("trace_level '" + v + "': OFF, TIMESTAMPS or TENSORS");
    }
    return Status::Ok();
  }
  if (values.size() != 1) return InvalidArgument(name + " takes one value");
  if (name == "trace_file") return Status::Ok();
  std::optional<int64_t> v = ParseInt(values[0]);
  if (name == "trace_rate" && (!v || *v < 1)) return InvalidArgument("trace_rate must be an integer of 1 or more");
  if (name == "trace_count" && (!v || *v < -1)) return InvalidArgument("trace_count must be -1 or more");
  if (name == "log_frequency" && (!v || *v < 0)) return InvalidArgument("log_frequency must be 0 or more");
  return Status::Ok();
}

bool HasLevel(const std::vector<std::string>& levels, const char* level) {
  return std::find(levels.begin(), levels.end(), level) != levels.end();
}

// "1,2,3": a list of counts or dimensions, as Triton writes a tensor's shape.
template <typename List>
std::string CommaList(const List& values) {
  std::string s;
  for (const auto& v : values) s += (s.empty() ? "" : ",") + std::to_string(v);
  return s;
}

// A tensor's values as Triton's TENSORS trace writes them: comma-separated, numbers in their
// shortest exact form, a BYTES input's strings as they are.
std::string TensorData(const Tensor& t) {
  std::string s;
  if (!t.defined()) return s;
  char buf[32];
  const int64_t n = t.size();
  for (int64_t i = 0; i < n; ++i) {
    if (i) s += ',';
    std::to_chars_result r{buf, std::errc()};
    switch (t.dtype()) {
      case DType::kF32:
        r = std::to_chars(buf, buf + sizeof(buf), t.data<float>()[i]);
        break;
      case DType::kF64:
        r = std::to_chars(buf, buf + sizeof(buf), t.data<double>()[i]);
        break;
      case DType::kF16:
        r = std::to_chars(buf, buf + sizeof(buf), HalfToFloat(t.data<uint16_t>()[i]));
        break;
      case DType::kBF16:
        r = std::to_chars(buf, buf + sizeof(buf), BF16ToFloat(t.data<uint16_t>()[i]));
        break;
      case DType::kI8:
        r = std::to_chars(buf, buf + sizeof(buf), static_cast<int>(t.data<int8_t>()[i]));
        break;
      case DType::kU8:
      case DType::kBool:
        r = std::to_chars(buf, buf + sizeof(buf), static_cast<int>(t.data<uint8_t>()[i]));
        break;
      case DType::kI32:
        r = std::to_chars(buf, buf + sizeof(buf), t.data<int32_t>()[i]);
        break;
      case DType::kI64:
        r = std::to_chars(buf, buf + sizeof(buf), t.data<int64_t>()[i]);
        break;
      case DType::kInvalid:
        break;
    }
    s.append(buf, r.ptr);
  }
  return s;
}

nlohmann::json TensorActivity(uint64_t id, const char* activity, nlohmann::json tensor) {
  return {{"id", id}, {"activity", activity}, {"tensor", std::move(tensor)}};
}

}  // namespace

RequestTracer::RequestTracer() {
  MutexLock lock(mu_);
  global_ = {{"trace_level", {"OFF"}},
             {"trace_rate", {"1000"}},
             {"trace_count", {"-1"}},
             {"log_frequency", {"0"}},
             {"trace_file", {""}}};
}

RequestTracer::~RequestTracer() {
  MutexLock lock(mu_);
  for (auto& [file, out] : outputs_) {
    if (!out.objects.empty()) Flush(file, false);
  }
}

RequestTracer::Settings RequestTracer::Current(const std::string& model) const {
  MutexLock lock(mu_);
  Settings s = global_;
  auto it = models_.find(model);
  if (it != models_.end()) {
    for (const auto& [k, v] : it->second) s[k] = v;
  }
  return s;
}

RequestTracer::Resolved RequestTracer::Resolve(const std::string& model) const {
  Settings s = global_;
  auto it = models_.find(model);
  if (it != models_.end()) {
    for (const auto& [k, v] : it->second) s[k] = v;
  }
  Resolved r;
  r.timestamps = HasLevel(s["trace_level"], "TIMESTAMPS");
  r.tensors = HasLevel(s["trace_level"], "TENSORS");
  r.on = r.timestamps || r.tensors;
  r.rate = ParseInt(s["trace_rate"][0]).value_or(1000);
  r.count = ParseInt(s["trace_count"][0]).value_or(-1);
  r.log_frequency = ParseInt(s["log_frequency"][0]).value_or(0);
  r.file = s["trace_file"][0];
  return r;
}

Status RequestTracer::Apply(const std::string& model, const Update& update) {
  MutexLock lock(mu_);
  Settings global = global_;
  std::map<std::string, Settings> models = models_;
  Settings& target = model.empty() ? global : models[model];
  for (const auto& [name, values] : update) {
    if (std::find(std::begin(kNames), std::end(kNames), name) == std::end(kNames)) {
      return InvalidArgument("unknown trace setting '" + name +
                             "' (trace_level, trace_rate, trace_count, log_frequency, trace_file)");
    }
    if (!values) {
      if (model.empty()) return InvalidArgument("the global " + name + " cannot be cleared");
      target.erase(name);
      continue;
    }
    RANKD_RETURN_IF_ERROR(CheckSetting(name, *values));
    target[name] = *values;
  }
  // Tracing on needs somewhere to write, for the global settings and every model's.
  std::swap(global_, global);
  std::swap(models_, models);
  std::vector<std::string> scopes = {""};
  for (const auto& entry : models_) scopes.push_back(entry.first);
  Status ok = Status::Ok();
  for (const std::string& m : scopes) {
    Resolved r = Resolve(m);
    if (ok.ok() && r.on && r.file.empty()) ok = InvalidArgument("trace_level TIMESTAMPS or TENSORS needs a trace_file");
  }
  if (!ok.ok()) {
    std::swap(global_, global);
    std::swap(models_, models);
    return ok;
  }
  if (update.count("trace_count")) remaining_[model] = Resolve(model).count;
  if (update.count("trace_rate")) seen_.erase(model);
  if (update.count("trace_file")) {
    const std::string file = Resolve(model).file;
    if (outputs_.count(file)) outputs_[file].next_index = 0;  // Triton: the index restarts with a new file
  }
  bool any = false;
  for (const std::string& m : scopes) any = any || Resolve(m).on;
  any_on_ = any;
  return Status::Ok();
}

Status RequestTracer::ApplyFlags(const std::vector<std::string>& flags) {
  if (flags.empty()) return Status::Ok();
  Update update;
  for (const std::string& flag : flags) {
    std::string spec = flag;
    if (spec.rfind("triton,", 0) == 0) spec = spec.substr(7);
    const size_t eq = spec.find('=');
    const std::string name = spec.substr(0, eq), value = eq == std::string::npos ? "" : spec.substr(eq + 1);
    if (spec.rfind("opentelemetry,", 0) == 0) {
      return InvalidArgument("--trace-config " + flag + ": only Triton's trace mode is supported");
    }
    static const std::map<std::string, std::string> kSettings = {{"level", "trace_level"},
                                                                 {"rate", "trace_rate"},
                                                                 {"count", "trace_count"},
                                                                 {"file", "trace_file"},
                                                                 {"log-frequency", "log_frequency"}};
    auto it = kSettings.find(name);
    if (eq == std::string::npos || it == kSettings.end()) {
      return InvalidArgument("--trace-config " + flag +
                             ": expected [triton,]SETTING=VALUE with SETTING level, rate, "
                             "count, file or log-frequency");
    }
    std::optional<std::vector<std::string>>& values = update[it->second];
    if (!values || it->second != "trace_level") values = std::vector<std::string>{};
    values->push_back(value);
  }
  Status s = Apply("", update);
  return s.ok() ? s : s.WithContext("--trace-config");
}

uint64_t RequestTracer::Sample(const std::string& model) {
  if (!any_on_.load(std::memory_order_relaxed)) return 0;
  MutexLock lock(mu_);
  Resolved r = Resolve(model);
  if (!r.on) return 0;
  const uint64_t n = seen_[model]++;
  if (n % static_cast<uint64_t>(r.rate) != 0) return 0;
  // trace_count counts down where it was set: the model's own, else the global one.
  const std::string scope = models_.count(model) && models_[model].count("trace_count") ? model : "";
  auto left = remaining_.find(scope);
  if (left != remaining_.end() && left->second >= 0) {
    if (left->second == 0) return 0;
    --left->second;
  }
  return next_id_++;
}

void RequestTracer::Record(uint64_t id, const std::string& model, int64_t version, const InferRequest& request,
                           const std::vector<InferOutput>& outputs, const Times& t) {
  const std::string& request_id = request.id;
  auto ns = [](Clock::time_point p) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(p.time_since_epoch()).count());
  };
  nlohmann::json head = {{"id", id}, {"model_name", model}, {"model_version", version}};
  if (!request_id.empty()) head["request_id"] = request_id;
  nlohmann::json stamps = nlohmann::json::array();
  for (const auto& [name, at] :
       std::initializer_list<std::pair<const char*, Clock::time_point>>{{"REQUEST_START", t.received},
                                                                        {"QUEUE_START", t.received},
                                                                        {"COMPUTE_START", t.started},
                                                                        {"COMPUTE_INPUT_END", t.parsed},
                                                                        {"COMPUTE_OUTPUT_START", t.scored},
                                                                        {"COMPUTE_END", t.written},
                                                                        {"REQUEST_END", t.written}}) {
    stamps.push_back({{"name", name}, {"ns", ns(at)}});
  }
  nlohmann::json times = {{"id", id}, {"timestamps", stamps}};
  Resolved r;
  {
    MutexLock lock(mu_);
    r = Resolve(model);
  }
  // The tensors' text is made outside the lock: a large request's takes a while.
  std::vector<std::string> objects = {head.dump()};
  if (r.timestamps) objects.push_back(times.dump());
  if (r.tensors) {
    for (const InferInput& in : request.inputs) {
      nlohmann::json tensor;
      tensor["name"] = in.name;
      if (in.is_bytes()) {
        std::string data;
        for (int64_t i = 0; i < in.strings.size(); ++i) data += (i ? "," : "") + std::string(in.strings.at(i));
        tensor["data"] = data;
        tensor["shape"] = CommaList(in.strings.shape);
        tensor["dtype"] = "BYTES";
      } else {
        tensor["data"] = TensorData(in.data);
        tensor["shape"] = CommaList(in.data.shape());
        tensor["dtype"] = DTypeName(in.data.dtype());
      }
      if (!in.lengths.empty()) tensor["lengths"] = CommaList(in.lengths);
      objects.push_back(TensorActivity(id, "TENSOR_QUEUE_INPUT", std::move(tensor)).dump());
    }
    for (const InferOutput& o : outputs) {
      nlohmann::json tensor = {{"name", o.name},
                               {"data", TensorData(o.data)},
                               {"shape", CommaList(o.data.shape())},
                               {"dtype", DTypeName(o.data.dtype())}};
      objects.push_back(TensorActivity(id, "TENSOR_BACKEND_OUTPUT", std::move(tensor)).dump());
    }
  }
  MutexLock lock(mu_);
  r = Resolve(model);  // as it stands now: the settings may have changed meanwhile
  Output& out = outputs_[r.file];
  for (std::string& o : objects) out.objects.push_back(std::move(o));
  ++out.traces;
  const std::string scope = models_.count(model) && models_[model].count("trace_count") ? model : "";
  auto left = remaining_.find(scope);
  const bool ran_out = left != remaining_.end() && left->second == 0;
  if ((r.log_frequency > 0 && out.traces % static_cast<uint64_t>(r.log_frequency) == 0) || ran_out) {
    Flush(r.file, true);
  }
}

void RequestTracer::Flush(const std::string& file, bool indexed) {
  Output& out = outputs_[file];
  const std::string path = indexed ? file + "." + std::to_string(out.next_index++) : file;
  // Written beside it and renamed: a reader finds the whole file or none.
  const std::string partial = path + ".partial";
  {
    std::ofstream f(partial, std::ios::trunc);
    f << "[";
    for (size_t i = 0; i < out.objects.size(); ++i) f << (i ? "," : "") << out.objects[i];
    f << "]\n";
    f.close();
    if (!f || std::rename(partial.c_str(), path.c_str()) != 0)
      LogError("trace file '" + path + "' could not be written");
  }
  out.objects.clear();
}

}  // namespace rankd
