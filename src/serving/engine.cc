#include "rankd/engine.h"

#include "serving/model.h"

namespace rankd {

Engine::Engine(std::unique_ptr<Model> model) : model_(std::move(model)) {}
Engine::~Engine() = default;

StatusOr<std::unique_ptr<Engine>> Engine::Load(const std::string& model_dir, int64_t version,
                                               const EngineOptions& options) {
  ModelOptions model_options;
  model_options.max_rows = options.max_rows;
  RANKD_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(model_dir, version, model_options));
  return std::unique_ptr<Engine>(new Engine(std::move(model)));
}

const std::string& Engine::name() const { return model_->name(); }
int64_t Engine::version() const { return model_->version(); }

std::vector<InputSignature> Engine::inputs() const { return model_->inputs(); }
std::vector<OutputSignature> Engine::outputs() const { return model_->outputs(); }

StatusOr<std::vector<InferOutput>> Engine::Infer(const InferRequest& request) const { return model_->Infer(request); }

}  // namespace rankd
