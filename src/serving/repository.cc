#include "serving/repository.h"

#include <algorithm>
#include <filesystem>

namespace rankd {
namespace fs = std::filesystem;

namespace {

int64_t ModelStamp(const std::string& dir, int64_t version) {
  std::error_code ec;
  fs::path onnx = fs::path(dir) / std::to_string(version) / "model.onnx";
  auto t = fs::last_write_time(onnx, ec);
  int64_t stamp = ec ? 0 : static_cast<int64_t>(t.time_since_epoch().count());
  for (const char* config : {"config.yaml", "config.yml", "config.json"}) {
    auto c = fs::last_write_time(fs::path(dir) / config, ec);
    if (!ec) stamp ^= static_cast<int64_t>(c.time_since_epoch().count());
  }
  return stamp;
}

std::vector<int64_t> SelectVersions(const ModelConfig& config, const std::vector<int64_t>& available) {
  const VersionPolicy& p = config.version_policy;
  std::vector<int64_t> out;
  if (p.kind == VersionPolicy::Kind::kAll) return available;
  if (p.kind == VersionPolicy::Kind::kSpecific) {
    for (int64_t v : p.versions) {
      if (std::find(available.begin(), available.end(), v) != available.end()) out.push_back(v);
    }
    return out;
  }
  for (size_t i = 0; i < available.size() && static_cast<int64_t>(i) < p.latest; ++i) {
    out.push_back(available[available.size() - 1 - i]);
  }
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<ModelRepository>> ModelRepository::Create(const RepositoryOptions& options) {
  if (!fs::is_directory(options.root)) return NotFound("model repository '" + options.root + "' is not a directory");
  std::unique_ptr<ModelRepository> repo(new ModelRepository(options));
  std::vector<std::string> names = options.mode == ModelControlMode::kExplicit ? options.startup_models
                                                                               : repo->ModelDirectories();
  for (const std::string& name : repo->ModelDirectories()) repo->models_[name];
  for (const std::string& name : names) {
    Status s = repo->LoadModel(name);
    if (!s.ok() && options.mode == ModelControlMode::kExplicit) return s;  // asked for by name: fatal
  }
  return repo;
}

std::vector<std::string> ModelRepository::ModelDirectories() const {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(options_.root, ec)) {
    if (e.is_directory() && !ListModelVersions(e.path().string()).empty()) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Status ModelRepository::LoadModel(const std::string& name) {
  std::lock_guard<std::mutex> load_lock(load_mu_);
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return InvalidArgument("'" + name + "' is not a model name");
  }
  std::string dir = (fs::path(options_.root) / name).string();
  std::vector<int64_t> available = ListModelVersions(dir);
  Status status;
  std::map<int64_t, std::shared_ptr<const Model>> loaded;
  std::map<int64_t, int64_t> stamps;
  if (available.empty()) {
    status = NotFound("model '" + name + "' is not in the repository (no version directory with a model.onnx)");
  } else {
    auto config = LoadModelConfig(dir);
    std::vector<int64_t> versions = config.ok() ? SelectVersions(*config, available) : std::vector<int64_t>{};
    if (!config.ok()) status = config.status();
    if (config.ok() && versions.empty()) status = NotFound("model '" + name + "': its version policy selects no version");
    std::map<int64_t, std::shared_ptr<const Model>> current;
    std::map<int64_t, int64_t> current_stamps;
    {
      std::lock_guard<std::mutex> lock(mu_);
      current = models_[name].versions;
      current_stamps = models_[name].stamps;
    }
    for (int64_t v : versions) {
      int64_t stamp = ModelStamp(dir, v);
      auto have = current.find(v);
      if (have != current.end() && current_stamps[v] == stamp) {  // unchanged: keep serving it
        loaded[v] = have->second;
        stamps[v] = stamp;
        continue;
      }
      auto model = Model::Load(dir, v, options_.model_options);
      if (!model.ok()) {
        status = model.status();
        if (have != current.end()) {  // a failed reload keeps the version that serves
          loaded[v] = have->second;
          stamps[v] = current_stamps[v];
        }
        continue;
      }
      loaded[v] = std::shared_ptr<const Model>(std::move(*model));
      stamps[v] = stamp;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = models_[name];
  e.wanted = true;
  e.failure = status.ok() ? "" : status.message();
  if (!loaded.empty()) {
    e.versions = std::move(loaded);
    e.stamps = std::move(stamps);
  }
  return status;
}

StatusOr<std::shared_ptr<const Model>> ModelRepository::Get(const std::string& name, int64_t version) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return NotFound("unknown model '" + name + "'");
  const Entry& e = it->second;
  if (e.versions.empty()) {
    return Unavailable("model '" + name + "' is not ready" + (e.failure.empty() ? "" : ": " + e.failure));
  }
  if (version < 0) return e.versions.rbegin()->second;
  auto v = e.versions.find(version);
  if (v == e.versions.end()) return NotFound("model '" + name + "' has no ready version " + std::to_string(version));
  return v->second;
}

Status ModelRepository::Load(const std::string& name) {
  if (options_.mode == ModelControlMode::kNone) {
    return Unavailable("explicit model load/unload is not allowed: the server runs with --model-control-mode=none");
  }
  return LoadModel(name);
}

Status ModelRepository::Unload(const std::string& name) {
  if (options_.mode == ModelControlMode::kNone) {
    return Unavailable("explicit model load/unload is not allowed: the server runs with --model-control-mode=none");
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return NotFound("unknown model '" + name + "'");
  it->second.versions.clear();  // requests holding a version finish on it
  it->second.stamps.clear();
  it->second.wanted = false;
  it->second.failure = "unloaded";
  return Status::Ok();
}

void ModelRepository::Poll() {
  std::vector<std::string> present = ModelDirectories();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = models_.begin(); it != models_.end();) {  // directories removed from disk
      if (std::find(present.begin(), present.end(), it->first) == present.end()) it = models_.erase(it);
      else ++it;
    }
  }
  for (const std::string& name : present) {
    bool wanted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Entry& e = models_[name];
      wanted = e.wanted || options_.mode == ModelControlMode::kPoll;
    }
    if (wanted) (void)LoadModel(name);
  }
}

std::vector<RepositoryIndexEntry> ModelRepository::Index() const {
  std::vector<RepositoryIndexEntry> out;
  std::vector<std::string> dirs = ModelDirectories();
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& name : dirs) {
    auto it = models_.find(name);
    if (it == models_.end() || it->second.versions.empty()) {
      out.push_back({name, -1, "UNAVAILABLE", it == models_.end() ? "not loaded" : it->second.failure});
      continue;
    }
    for (const auto& [v, model] : it->second.versions) out.push_back({name, v, "READY", ""});
  }
  return out;
}

bool ModelRepository::Ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, e] : models_) {
    if (e.wanted && e.versions.empty()) return false;
  }
  return true;
}

}  // namespace rankd
