#include "serving/repository.h"

#include <algorithm>
#include <filesystem>

namespace rankd {
namespace fs = std::filesystem;

namespace {

// What poll mode compares to see a version changed: the modification times and sizes of every
// file in its directory (model.onnx and its external data) and of the model's config.
int64_t ModelStamp(const std::string& dir, int64_t version) {
  std::error_code ec;
  uint64_t hash = 0;
  for (const auto& f : fs::recursive_directory_iterator(fs::path(dir) / std::to_string(version), ec)) {
    std::error_code file_ec;
    if (!f.is_regular_file(file_ec)) continue;
    auto t = f.last_write_time(file_ec);
    auto size = f.file_size(file_ec);
    if (file_ec) continue;
    hash += (static_cast<uint64_t>(t.time_since_epoch().count()) * 1000003) ^ size;  // in any order
  }
  auto stamp = static_cast<int64_t>(hash);
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
  std::vector<std::string> names =
      options.mode == ModelControlMode::kExplicit ? options.startup_models : repo->ModelDirectories();
  {
    MutexLock lock(repo->mu_);
    for (const std::string& name : repo->ModelDirectories()) repo->models_[name];
  }
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
    if (e.is_directory() && !ListModelVersions(e.path().string()).empty())
      names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Status ModelRepository::LoadModel(const std::string& name, bool set_override, std::optional<ModelConfig> override) {
  MutexLock load_lock(load_mu_);
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return InvalidArgument("'" + name + "' is not a model name");
  }
  std::optional<ModelConfig> previous;
  if (auto it = overrides_.find(name); it != overrides_.end()) previous = it->second;
  if (!set_override) override = previous;
  // A config given or taken back reloads every version, even where its files are unchanged.
  const bool config_changed = set_override && (override.has_value() || previous.has_value());
  std::string dir = (fs::path(options_.root) / name).string();
  std::vector<int64_t> available = ListModelVersions(dir);
  if (available.empty()) {  // not in the repository: nothing changes, readiness included
    return NotFound("model '" + name + "' is not in the repository (no version directory with a model.onnx)");
  }
  Entry before;
  {
    MutexLock lock(mu_);
    auto it = models_.find(name);
    if (it != models_.end()) before = it->second;
  }
  Status status;
  std::vector<std::pair<int64_t, Status>> failures;  // reported once the lock is released
  std::map<int64_t, std::shared_ptr<const Model>> loaded;
  std::map<int64_t, int64_t> stamps;
  std::map<int64_t, std::string> version_failures;
  std::map<int64_t, int64_t> failed_stamps;
  StatusOr<ModelConfig> config = override ? StatusOr<ModelConfig>(*override) : LoadModelConfig(dir);
  ModelOptions model_options = options_.model_options;
  model_options.config = override;
  std::vector<int64_t> versions = config.ok() ? SelectVersions(*config, available) : std::vector<int64_t>{};
  if (!config.ok()) status = config.status();
  if (config.ok() && versions.empty()) status = NotFound("model '" + name + "': its version policy selects no version");
  if (!status.ok() && status.message() != before.failure) failures.push_back({-1, status});  // once per cause
  for (int64_t v : versions) {
    int64_t stamp = ModelStamp(dir, v);
    auto have = before.versions.find(v);
    bool serving = have != before.versions.end();
    if (serving && before.stamps[v] == stamp && !config_changed) {  // unchanged: keep serving it
      loaded[v] = have->second;
      stamps[v] = stamp;
      continue;
    }
    auto failed = before.failed_stamps.find(v);
    if (failed != before.failed_stamps.end() && failed->second == stamp &&
        !config_changed) {  // unchanged since it failed
      version_failures[v] = before.version_failures[v];
      failed_stamps[v] = stamp;
      if (status.ok()) status = Unavailable(before.version_failures[v]);
      if (serving) {
        loaded[v] = have->second;
        stamps[v] = before.stamps[v];
      }
      continue;
    }
    auto model = Model::Load(dir, v, model_options);
    if (!model.ok()) {
      status = model.status();
      failures.push_back({v, model.status()});
      version_failures[v] = model.status().message();
      failed_stamps[v] = stamp;
      if (serving) {  // a failed reload keeps the version that serves
        loaded[v] = have->second;
        stamps[v] = before.stamps[v];
      }
      continue;
    }
    loaded[v] = std::shared_ptr<const Model>(std::move(*model));
    stamps[v] = stamp;
  }
  {
    MutexLock lock(mu_);
    Entry& e = models_[name];
    e.wanted = true;
    e.failure = config.ok() && !versions.empty() ? "" : status.message();
    e.version_failures = std::move(version_failures);
    e.failed_stamps = std::move(failed_stamps);
    if (!loaded.empty() && !closed_) {  // nothing loaded: what served before serves on
      e.versions = std::move(loaded);
      e.stamps = std::move(stamps);
    }
  }
  if (options_.on_load_failure) {
    for (const auto& [v, why] : failures) options_.on_load_failure(name, v, why);
  }
  const std::optional<ModelConfig>& kept = status.ok() ? override : previous;  // a failed load changes no override
  if (kept) {
    overrides_[name] = *kept;
  } else {
    overrides_.erase(name);
  }
  return status;
}

StatusOr<std::shared_ptr<const Model>> ModelRepository::Get(std::string_view name, int64_t version) const {
  MutexLock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return NotFound("unknown model '" + std::string(name) + "'");
  const Entry& e = it->second;
  if (e.versions.empty()) {
    return Unavailable("model '" + std::string(name) + "' is not ready" + (e.failure.empty() ? "" : ": " + e.failure));
  }
  if (version < 0) return e.versions.rbegin()->second;
  auto v = e.versions.find(version);
  if (v == e.versions.end()) {
    return NotFound("model '" + std::string(name) + "' has no ready version " + std::to_string(version));
  }
  return v->second;
}

Status ModelRepository::Load(const std::string& name, const std::string& config_override) {
  if (options_.mode == ModelControlMode::kNone) {
    return Unavailable("explicit model load/unload is not allowed: the server runs with --model-control-mode=none");
  }
  std::optional<ModelConfig> override;
  if (!config_override.empty()) {
    StatusOr<ModelConfig> parsed = ParseTritonModelConfigJson(config_override);
    if (!parsed.ok()) return parsed.status().WithContext("model '" + name + "'");
    if (!parsed->name.empty() && parsed->name != name) {
      return InvalidArgument("the config override names model '" + parsed->name + "', not '" + name + "'");
    }
    override = std::move(*parsed);
  }
  return LoadModel(name, true, std::move(override));
}

Status ModelRepository::Unload(const std::string& name) {
  if (options_.mode == ModelControlMode::kNone) {
    return Unavailable("explicit model load/unload is not allowed: the server runs with --model-control-mode=none");
  }
  MutexLock lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return NotFound("unknown model '" + name + "'");
  it->second.versions.clear();  // requests holding a version finish on it
  it->second.stamps.clear();
  it->second.wanted = false;
  it->second.failure = "unloaded";
  return Status::Ok();
}

void ModelRepository::Close(const Status& why) {
  std::vector<std::shared_ptr<const Model>> held;
  {
    MutexLock lock(mu_);
    closed_ = true;
    for (auto& [name, e] : models_) {
      for (auto& [v, model] : e.versions) held.push_back(std::move(model));
      e.versions.clear();
      e.stamps.clear();
      e.failure = why.message();
    }
  }
  for (const auto& model : held) model->FailQueued(why);
  held.clear();  // destroys each model held by nothing else, its batches run (~Batcher joins)
}

void ModelRepository::Poll() {
  std::vector<std::string> present = ModelDirectories();
  {
    MutexLock lock(mu_);
    for (auto it = models_.begin(); it != models_.end();) {  // directories removed from disk
      if (std::find(present.begin(), present.end(), it->first) == present.end())
        it = models_.erase(it);
      else
        ++it;
    }
  }
  for (const std::string& name : present) {
    bool wanted;
    {
      MutexLock lock(mu_);
      Entry& e = models_[name];
      wanted = e.wanted || options_.mode == ModelControlMode::kPoll;
    }
    if (wanted) (void)LoadModel(name);
  }
}

std::vector<RepositoryIndexEntry> ModelRepository::Index() const {
  std::vector<RepositoryIndexEntry> out;
  std::vector<std::string> dirs = ModelDirectories();
  MutexLock lock(mu_);
  for (const std::string& name : dirs) {
    auto it = models_.find(name);
    if (it == models_.end()) {
      out.push_back({name, -1, "UNAVAILABLE", "not loaded"});
      continue;
    }
    const Entry& e = it->second;
    std::map<int64_t, RepositoryIndexEntry> versions;
    for (const auto& [v, model] : e.versions) {
      Status servable = model->CheckServable();  // a table rewritten on disk, a poisoned GPU
      versions[v] = servable.ok() ? RepositoryIndexEntry{name, v, "READY", e.failure}
                                  : RepositoryIndexEntry{name, v, "UNAVAILABLE", servable.message()};
    }
    for (const auto& [v, why] : e.version_failures) {
      auto ready = versions.find(v);
      if (ready != versions.end())
        ready->second.reason = "a changed copy failed to load; the loaded one serves: " + why;
      else
        versions[v] = {name, v, "UNAVAILABLE", why};
    }
    if (versions.empty()) out.push_back({name, -1, "UNAVAILABLE", e.failure.empty() ? "not loaded" : e.failure});
    for (auto& [v, entry] : versions) out.push_back(std::move(entry));
  }
  return out;
}

bool ModelRepository::Ready() const {
  MutexLock lock(mu_);
  for (const auto& [name, e] : models_) {
    if (e.wanted && (e.versions.empty() || !e.versions.rbegin()->second->CheckServable().ok())) return false;
  }
  return true;
}

}  // namespace rankd
