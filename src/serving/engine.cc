#include "rankd/engine.h"

#include "runtime/backends.h"
#include "serving/model.h"

namespace rankd {

Engine::Engine(std::unique_ptr<Model> model) : model_(std::move(model)) {}
Engine::~Engine() = default;

StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  if (options.model_dir.empty()) return InvalidArgument("EngineOptions::model_dir is empty");
  if (options.batching < -1 || options.batching > 1) return InvalidArgument("EngineOptions::batching is -1, 0 or 1");
  if (options.executors < 0) return InvalidArgument("EngineOptions::executors must not be negative");
  ModelOptions model_options;
  RANKD_ASSIGN_OR_RETURN(model_options.backend, FindBackend(options.backend, options.device));
  model_options.precision = options.precision;
  model_options.batching = options.batching;
  model_options.executors = options.executors;
  model_options.max_rows = options.max_rows;
  RANKD_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(options.model_dir, options.version, model_options));
  return std::unique_ptr<Engine>(new Engine(std::move(model)));
}

StatusOr<std::unique_ptr<Engine>> Engine::Load(const std::string& model_dir, int64_t version,
                                               const EngineOptions& options) {
  EngineOptions with = options;
  with.model_dir = model_dir;
  with.version = version;
  return Create(with);
}

const std::string& Engine::name() const { return model_->name(); }
int64_t Engine::version() const { return model_->version(); }
std::string Engine::backend() const { return model_->backend().name(); }
int Engine::device() const { return model_->backend().device(); }

std::vector<InputSignature> Engine::inputs() const { return model_->inputs(); }
std::vector<OutputSignature> Engine::outputs() const { return model_->outputs(); }

StatusOr<std::vector<InferOutput>> Engine::Infer(const InferRequest& request) const { return model_->Infer(request); }

}  // namespace rankd
