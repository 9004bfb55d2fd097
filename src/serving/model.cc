// Model: loading (import, passes, executors, buckets, batching) and scoring a request.
#include "serving/model.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "backend/backend.h"
#include "compile/passes.h"
#include "model/onnx_import.h"
#include "runtime/backends.h"
#include "runtime/op_profile.h"

namespace rankd {
namespace fs = std::filesystem;

std::vector<int64_t> ListModelVersions(const std::string& model_dir) {
  std::vector<int64_t> versions;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(model_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.empty() || name.size() > 18 ||
        !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    if (fs::exists(entry.path() / "model.onnx")) versions.push_back(std::stoll(name));
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

StatusOr<int64_t> ParseModelVersion(const std::string& text) {
  if (text.empty()) return int64_t{-1};
  if (text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument("'" + text + "' is not a model version");
  }
  return std::stoll(text);
}

StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& model_dir, int64_t version,
                                             const ModelOptions& options) {
  if (!fs::is_directory(model_dir)) return NotFound("model directory '" + model_dir + "' does not exist");
  std::vector<int64_t> versions = ListModelVersions(model_dir);
  if (versions.empty()) return NotFound("'" + model_dir + "' has no version directory with a model.onnx");
  if (version < 0) version = versions.back();
  if (std::find(versions.begin(), versions.end(), version) == versions.end()) {
    return NotFound("'" + model_dir + "' has no version " + std::to_string(version));
  }
  RANKD_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(model_dir));
  if (config.name.empty()) config.name = fs::path(model_dir).filename().string();
  std::string onnx = (fs::path(model_dir) / std::to_string(version) / "model.onnx").string();
  RANKD_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadFile(onnx, std::move(config), options));
  model->version_ = version;
  return model;
}

StatusOr<std::unique_ptr<Model>> Model::LoadFile(const std::string& onnx_path, ModelConfig config,
                                                 const ModelOptions& options) {
  std::unique_ptr<Model> model(new Model());
  model->options_ = options;
  model->config_ = std::move(config);
  if (model->config_.name.empty()) model->config_.name = fs::path(onnx_path).stem().string();
  RANKD_ASSIGN_OR_RETURN(model->graph_, ImportOnnxFile(onnx_path));
  Status s = model->Prepare();
  if (s.ok()) s = model->CheckFiles();  // a table changed while the load read it
  if (!s.ok()) return s.WithContext("model '" + model->config_.name + "'");
  return model;
}

Status Model::Prepare() {
  RANKD_RETURN_IF_ERROR(ResolveModelConfig(graph_, config_));
  RANKD_ASSIGN_OR_RETURN(const Precision precision,
                         ParsePrecision(options_.precision.empty() ? config_.precision : options_.precision));
  RANKD_ASSIGN_OR_RETURN(report_.lowered_splits, LowerSplits(graph_));  // not a fusion: there is no Split kernel
  RANKD_ASSIGN_OR_RETURN(report_.lowered_gelus, LowerGelus(graph_));    // nor a Gelu kernel
  RANKD_ASSIGN_OR_RETURN(report_.folded_nodes, FoldConstants(graph_));
  report_.removed_nodes = RemoveDeadNodes(graph_);
  // Every node well formed (its op known, its inputs there) before the passes below read it; the
  // CPU backend, the reference, has every op an imported model may hold.
  RANKD_RETURN_IF_ERROR(CpuBackend().CheckGraph(graph_));
  if (options_.fusion) {
    report_.fused_embedding_bags = FuseMaskedEmbeddingBags(graph_);
    report_.fused_layer_norms = FuseDecomposedLayerNorms(graph_);
  }
  for (const InputConfig& in : config_.inputs) {
    if (in.ragged) ragged_names_.push_back(in.name);
  }
  report_.ragged_inputs = static_cast<int>(ragged_names_.size());
  RANKD_RETURN_IF_ERROR(ApplyRaggedInputs(graph_, ragged_names_));
  if (!options_.table_dtype.empty()) {
    DType d = DTypeFromName(options_.table_dtype).value_or(DType::kInvalid);
    if (d != DType::kF32 && d != DType::kBF16 && d != DType::kF16)
      return InvalidArgument("table dtype must be FP32, BF16 or FP16");
    config_.table_dtype = d;
  }
  report_.narrowed_tables = StoreTablesAs(graph_, config_.table_dtype);  // before hoisting copies the graph
  BindGraphInputs();
  RANKD_RETURN_IF_ERROR(SplitProducts());
  if (options_.fusion) report_.fused_epilogues = FuseGemmEpilogues(graph_);  // after the split: it reads bare products
  Graph unhoisted = graph_;  // shares the constants; kept until the hoisted graph is checked
  RANKD_RETURN_IF_ERROR(StartHoisting().WithContext("user-side hoisting"));
  if (options_.fusion) {  // after hoisting, which runs user-side bags once per user before any concat
    report_.fused_embedding_concats = FuseEmbeddingConcats(graph_);
    report_.merged_tables = MergeTablesSharingIds(graph_);
    FuseEmbeddingConcats(unhoisted);
    MergeTablesSharingIds(unhoisted);
  }
  RANKD_RETURN_IF_ERROR(FuseAfterHoisting(precision));
  backend_ = options_.backend ? options_.backend : &CpuBackend();
  max_executors_ = options_.executors > 0 ? options_.executors : backend_->DefaultExecutors();
  RANKD_RETURN_IF_ERROR(backend_->CheckGraph(graph_));
  RANKD_ASSIGN_OR_RETURN(resources_, backend_->PrepareModel(graph_, precision));
  executors_ = std::make_unique<ExecutorPool>(*backend_, resources_, max_executors_);
  if (hoisted_) {
    std::string why = CheckHoisting();
    if (!why.empty()) {  // a rule proved something false: run the graph as written
      report_.hoisting = "off: " + why;
      report_.hoisting_gathers.clear();
      hoisted_ = false;
      graph_ = std::move(unhoisted);
      BindGraphInputs();
      RANKD_RETURN_IF_ERROR(FuseAfterHoisting(precision));
      RANKD_RETURN_IF_ERROR(backend_->CheckGraph(graph_));
      {
        std::lock_guard<std::mutex> lock(mu_);
        plans_.clear();
        plan_order_.clear();
        bucket_plans_.clear();
      }
      RANKD_ASSIGN_OR_RETURN(resources_, backend_->PrepareModel(graph_, precision));
      executors_ = std::make_unique<ExecutorPool>(*backend_, resources_, max_executors_);  // for the new graph
    }
  }
  for (const InputConfig& in : config_.inputs) {
    input_signature_.push_back(
        {in.name, in.dtype, in.dims, in.scope == InputScope::kUser, in.ragged, in.ragged ? in.max_length : 0});
  }
  for (const OutputConfig& out : config_.outputs) {
    OutputSignature o{out.name, DType::kInvalid};
    for (int id : graph_.outputs) {
      if (graph_.values[static_cast<size_t>(id)].name == out.name)
        o.dtype = graph_.values[static_cast<size_t>(id)].dtype;
    }
    output_signature_.push_back(o);
  }
  FindIdsIn32Bits();
  for (const Binding& b : bindings_) input_kinds_.push_back(b.kind);
  for (int id : graph_.outputs) output_names_.push_back(graph_.values[static_cast<size_t>(id)].name);
  auto warm = Infer(ExampleRequest(2));
  if (!warm.ok()) return warm.status().WithContext("warm-up failed");
  RANKD_RETURN_IF_ERROR(StartBuckets().WithContext("shape buckets"));
  if (config_.batching.enabled) RANKD_RETURN_IF_ERROR(StartBatching().WithContext("batching"));
  return Status::Ok();
}
double Model::AgreementTolerance() const { return config_.precision == "fp32" ? 1e-3 : 3e-2; }

StatusOr<std::shared_ptr<const Plan>> Model::PlanFor(const std::vector<TensorMeta>& graph_inputs,
                                                     const std::vector<int64_t>& ragged_max_lengths) const {
  std::string key;
  for (const TensorMeta& m : graph_inputs) key += ShapeToString(m.shape) + DTypeName(m.dtype);
  for (int64_t len : ragged_max_lengths) {
    key += 'r';
    key += std::to_string(len);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
  }
  PlanOptions options;
  options.backend = backend_;
  options.ragged_max_lengths = ragged_max_lengths;
  RANKD_ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, Plan::Build(graph_, graph_inputs, options));
  std::lock_guard<std::mutex> lock(mu_);
  if (plans_.emplace(key, plan).second) {
    plan_order_.push_back(key);
    if (plan_order_.size() > options_.max_plans) {
      plans_.erase(plan_order_.front());
      plan_order_.erase(plan_order_.begin());
    }
  }
  return plan;
}

Status Model::CheckFiles() const {
  for (const auto& file : graph_.mapped_files) RANKD_RETURN_IF_ERROR(file->Check());
  return Status::Ok();
}

StatusOr<std::vector<InferOutput>> Model::Infer(const InferRequest& request, InferStats* stats) const {
  PhaseTimer whole("(a request, end to end)");  // made first, so it ends after the request's tensors are freed
  for (const std::string& out : request.outputs) {
    if (!std::any_of(config_.outputs.begin(), config_.outputs.end(),
                     [&](const OutputConfig& o) { return o.name == out; })) {
      return InvalidArgument("unknown output '" + out + "' for model '" + name() + "'");
    }
  }
  PreparedRequest prepared;
  auto t0 = std::chrono::steady_clock::now();
  RANKD_RETURN_IF_ERROR(BuildGraphInputs(request, prepared));
  if (OpProfile::phases()) OpProfile::RecordSince("(request turned into graph inputs)", t0);
  StatusOr<std::vector<Tensor>> result = batcher_ ? RunQueued(request, prepared, stats) : RunPrepared(prepared);
  if (!result.ok()) return result.status();
  RANKD_RETURN_IF_ERROR(CheckFiles());  // scores read from a table changed on disk are not returned
  std::vector<InferOutput> outputs;
  for (size_t i = 0; i < graph_.outputs.size(); ++i) {
    const std::string& out_name = graph_.values[static_cast<size_t>(graph_.outputs[i])].name;
    bool wanted = request.outputs.empty()
                      ? std::any_of(config_.outputs.begin(), config_.outputs.end(),
                                    [&](const OutputConfig& o) { return o.name == out_name; })
                      : std::find(request.outputs.begin(), request.outputs.end(), out_name) != request.outputs.end();
    if (wanted) outputs.push_back({out_name, std::move((*result)[i])});
  }
  return outputs;
}

}  // namespace rankd
