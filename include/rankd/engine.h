// rankd/engine.h: embed rankd in a process, with no server.
//
//   auto engine = rankd::Engine::Load("models/zoo/din");          // latest version
//   if (!engine.ok()) { ... engine.status().ToString() ... }
//   rankd::InferRequest request = ...;                             // see rankd/request.h
//   auto outputs = (*engine)->Infer(request);                      // thread-safe
//
// An Engine is one loaded model version on the CPU backend. Loading reads the config and the ONNX
// file, optimises the graph and warms up; Infer validates the request (bad input gives
// INVALID_ARGUMENT naming the input) and scores it. Infer may be called from many threads at once.
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

struct EngineOptions {
  // Largest candidate count per request when the model's config sets no max_batch_size.
  int64_t max_rows = 65536;
};

class Engine {
 public:
  // Loads version `version` (-1: the highest) of the model in `model_dir` (REPO/NAME).
  static StatusOr<std::unique_ptr<Engine>> Load(const std::string& model_dir, int64_t version = -1,
                                                const EngineOptions& options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const std::string& name() const;
  int64_t version() const;
  std::vector<InputSignature> inputs() const;
  std::vector<OutputSignature> outputs() const;

  // Scores one request: one user and N candidates (or N independent rows). Thread-safe.
  StatusOr<std::vector<InferOutput>> Infer(const InferRequest& request) const;

 private:
  explicit Engine(std::unique_ptr<Model> model);
  std::unique_ptr<Model> model_;
};

}  // namespace rankd
