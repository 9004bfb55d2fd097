#include "rankd/engine.h"

#include "serving/model.h"

namespace rankd {

Engine::Engine(std::unique_ptr<Model> model) : model_(std::move(model)) {}
Engine::~Engine() = default;

StatusOr<std::unique_ptr<Engine>> Engine::Load(const std::string& model_dir, int64_t version,
                                               const EngineOptions& options) {
  ModelOptions model_options;
  model_options.max_rows = options.max_rows;
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(model_dir, version, model_options));
  return std::unique_ptr<Engine>(new Engine(std::move(model)));
}

const std::string& Engine::name() const { return model_->name(); }
int64_t Engine::version() const { return model_->version(); }

std::vector<InputSignature> Engine::inputs() const {
  std::vector<InputSignature> out;
  for (const InputConfig& in : model_->config().inputs) {
    out.push_back({in.name, in.dtype, in.dims, in.scope == InputScope::kUser, in.ragged});
  }
  return out;
}

std::vector<std::string> Engine::outputs() const {
  std::vector<std::string> out;
  for (const OutputConfig& o : model_->config().outputs) out.push_back(o.name);
  return out;
}

StatusOr<std::vector<InferOutput>> Engine::Infer(const InferRequest& request) const { return model_->Infer(request); }

}  // namespace rankd
