// rankd/engine.h: embed rankd in a process, with no server.
//
//   rankd::EngineOptions options;
//   options.model_dir = "models/zoo/din";                          // REPO/NAME; latest version
//   options.backend = "auto";                                      // a GPU when there is one
//   auto engine = rankd::Engine::Create(options);
//   if (!engine.ok()) { ... engine.status().ToString() ... }
//   rankd::InferRequest request = ...;                             // see rankd/request.h
//   auto outputs = (*engine)->Infer(request);                      // thread-safe
//
// An Engine is one loaded model version on one backend. Creating it reads the config and the ONNX
// file, optimises the graph, checks what its optimisations promise (that padding, merging and
// running the user side once change no score) and warms up, so an engine that is created is one
// that scores. Infer validates the request (bad input gives INVALID_ARGUMENT naming the input) and
// scores it.
//
// Ownership and lifetimes: the Engine owns everything it loaded; destroy it after the last Infer
// has returned. Infer reads the request only while it runs (the caller keeps ownership; tensors may
// view memory the caller owns) and returns outputs that own their memory, valid after the Engine
// is gone. Thread safety: every method may be called from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rankd/dtype.h"
#include "rankd/request.h"
#include "rankd/signature.h"
#include "rankd/status.h"

namespace rankd {

class Model;

// The version of librankd.so ("0.1.0"), for a program that links the installed library
// (pkg-config rankd, or CMake's find_package(rankd) and target rankd::rankd).
const char* LibraryVersion();

struct EngineOptions {
  // The model: its directory in a repository (REPO/NAME, holding config and version directories)
  // and the version to load (-1: the highest).
  std::string model_dir;
  int64_t version = -1;
  // Where it runs: "cpu", "cuda" (the first GPU) or "auto" (a GPU when one is present and rankd was
  // built with CUDA, else the CPU).
  std::string backend = "cpu";
  // The GPU, by CUDA's index, for "cuda" and "auto" (which falls back to the CPU only for 0); 0 for
  // "cpu".
  int device = 0;
  // Overrides the config's precision when set: fp32 | tf32 | bf16 | bf16-activations.
  std::string precision;
  // Overrides the config's batching when 0 (off) or 1 (on: the config's settings, or their
  // defaults; docs/batching.md); -1 keeps the config's (every model batches unless its config
  // says `batching: {enabled: false}`; a call that finds the model idle runs on its own thread).
  int batching = -1;
  // Requests scored at once (executors); 0 picks the backend's default.
  int executors = 0;
  // Largest candidate count per request when the model's config sets no max_batch_size.
  int64_t max_rows = 65536;
};

class Engine {
 public:
  static StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options);
  // Create with `model_dir`, `version` and the rest of `options`.
  static StatusOr<std::unique_ptr<Engine>> Load(const std::string& model_dir, int64_t version = -1,
                                                const EngineOptions& options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const std::string& name() const;
  int64_t version() const;
  // The backend it runs on: "cpu" or "cuda", and the device's index (0 for the CPU).
  std::string backend() const;
  int device() const;
  std::vector<InputSignature> inputs() const;
  std::vector<OutputSignature> outputs() const;

  // Scores one request: one user and N candidates (or N independent rows).
  StatusOr<std::vector<InferOutput>> Infer(const InferRequest& request) const;

 private:
  explicit Engine(std::unique_ptr<Model> model);
  std::unique_ptr<Model> model_;
};

}  // namespace rankd
