// ModelRepository: the set of loaded models and versions, and their lifecycle.
//
// Triton's semantics: control mode `none` loads every model at start and never changes;
// `poll` rescans the repository (Poll, called on a timer) and loads new or changed versions;
// `explicit` loads only what Load() names (and --load-model at start). A version is loaded and
// warmed up outside the lock, then swapped in atomically: requests already holding the old Model
// (a shared_ptr) finish on it, new requests get the new one. A load that fails leaves the
// versions already serving in place and records why. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "rankd/status.h"
#include "serving/model.h"

namespace rankd {

enum class ModelControlMode { kNone, kPoll, kExplicit };

struct RepositoryOptions {
  std::string root;
  ModelControlMode mode = ModelControlMode::kNone;
  std::vector<std::string> startup_models;  // explicit mode: loaded at start
  ModelOptions model_options;
  // Called (outside the repository's lock) for every load that fails: the model, the version
  // (-1 when the model's config or version list failed) and why. The server logs and counts it.
  std::function<void(const std::string& model, int64_t version, const Status& why)> on_load_failure;
};

struct RepositoryIndexEntry {
  std::string name;
  int64_t version = -1;  // -1: the model has no loaded version
  std::string state;     // READY, UNAVAILABLE
  std::string reason;    // why it is unavailable; for a READY version, why a newer copy of it did not load
};

class ModelRepository {
 public:
  static StatusOr<std::unique_ptr<ModelRepository>> Create(const RepositoryOptions& options);

  // The model to serve: `version` -1 picks the highest ready version. NotFound for unknown
  // models and versions, Unavailable for a known model with no ready version.
  StatusOr<std::shared_ptr<const Model>> Get(std::string_view name, int64_t version = -1) const;
  // Loads (or reloads) the versions of `name` its version policy selects. Unavailable in mode none;
  // NotFound, changing nothing, for a name that is not in the repository. With `config_override`
  // (Triton's ModelConfig as JSON: tritonclient's load_model(config=...)), the model is loaded with
  // that config instead of its file's, until the next Load of it; an invalid override fails the
  // call and changes nothing.
  Status Load(const std::string& name, const std::string& config_override = "");
  // Stops serving `name`; requests in flight finish. Unavailable in mode none.
  Status Unload(const std::string& name);
  // For a server that stops, once its frontends have drained: every model stops serving, its
  // queued requests answered with `why` (Model::FailQueued), and a model held by the repository
  // alone is destroyed before Close returns, after its running batches; loads finishing later are
  // discarded. Requests answered, the frontends may go.
  void Close(const Status& why);
  // Rescans the repository: loads new or changed versions, drops removed ones (poll mode). A
  // version whose files are unchanged since a failed load is not retried.
  void Poll();
  // Every model directory in the repository with its state.
  std::vector<RepositoryIndexEntry> Index() const;
  // True when every model that should be loaded has a ready version whose files are unchanged on
  // disk (Model::CheckServable).
  bool Ready() const;
  ModelControlMode mode() const { return options_.mode; }

 private:
  explicit ModelRepository(RepositoryOptions options) : options_(std::move(options)) {}
  // Loads what `name`'s policy selects and swaps it in; keeps what serves on failure. With
  // `set_override`, `name`'s config override becomes `override` (none: its file's config) for this
  // load and later ones, or stays as it was when this load fails.
  Status LoadModel(const std::string& name, bool set_override = false, std::optional<ModelConfig> override = {});
  std::vector<std::string> ModelDirectories() const;

  struct Entry {
    std::map<int64_t, std::shared_ptr<const Model>> versions;  // ready versions
    std::map<int64_t, int64_t> stamps;                         // version -> model.onnx mtime
    std::map<int64_t, std::string> version_failures;           // version -> why its last load failed
    std::map<int64_t, int64_t> failed_stamps;                  // version -> stamp of that failed load
    std::string failure;                                       // last model-wide error (config), if any
    bool wanted = false;                                       // should be loaded
  };

  RepositoryOptions options_;
  mutable Mutex mu_;
  std::map<std::string, Entry, std::less<>> models_ RANKD_GUARDED_BY(mu_);  // found by string_view too
  bool closed_ RANKD_GUARDED_BY(mu_) = false;
  Mutex load_mu_;  // serialises loads (a load runs outside mu_)
  std::map<std::string, ModelConfig> overrides_ RANKD_GUARDED_BY(load_mu_);  // Load's config overrides
};

}  // namespace rankd
