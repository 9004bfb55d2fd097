#include "serving/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "backend/backend.h"
#include "compile/passes.h"
#include "model/onnx_import.h"

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
  ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(model_dir));
  if (config.name.empty()) config.name = fs::path(model_dir).filename().string();
  std::string onnx = (fs::path(model_dir) / std::to_string(version) / "model.onnx").string();
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadFile(onnx, std::move(config), options));
  model->version_ = version;
  return model;
}

StatusOr<std::unique_ptr<Model>> Model::LoadFile(const std::string& onnx_path, ModelConfig config,
                                                 const ModelOptions& options) {
  std::unique_ptr<Model> model(new Model());
  model->options_ = options;
  model->config_ = std::move(config);
  if (model->config_.name.empty()) model->config_.name = fs::path(onnx_path).stem().string();
  ASSIGN_OR_RETURN(model->graph_, ImportOnnxFile(onnx_path));
  Status s = model->Prepare();
  if (!s.ok()) return s.WithContext("model '" + model->config_.name + "'");
  return model;
}

Status Model::Prepare() {
  RETURN_IF_ERROR(ResolveModelConfig(graph_, config_));
  ASSIGN_OR_RETURN(report_.folded_nodes, FoldConstants(graph_));
  report_.removed_nodes = RemoveDeadNodes(graph_);
  report_.fused_embedding_bags = FuseMaskedEmbeddingBags(graph_);
  report_.fused_activations = FuseGemmActivations(graph_);
  for (const InputConfig& in : config_.inputs) {
    if (in.ragged) ragged_names_.push_back(in.name);
  }
  report_.ragged_inputs = static_cast<int>(ragged_names_.size());
  RETURN_IF_ERROR(ApplyRaggedInputs(graph_, ragged_names_));
  backend_ = options_.backend ? options_.backend : &CpuBackend();
  max_executors_ = options_.executors > 0 ? options_.executors : backend_ == &CpuBackend() ? 0 : 4;
  RETURN_IF_ERROR(backend_->CheckGraph(graph_));
  ASSIGN_OR_RETURN(Precision precision, ParsePrecision(options_.precision.empty() ? config_.precision : options_.precision));
  ASSIGN_OR_RETURN(resources_, backend_->PrepareModel(graph_, precision));
  // Bind graph inputs to config inputs (ApplyRaggedInputs put each pair where the input was).
  for (int id : graph_.inputs) {
    const std::string& name = graph_.values[static_cast<size_t>(id)].name;
    for (size_t c = 0; c < config_.inputs.size(); ++c) {
      const InputConfig& in = config_.inputs[c];
      int ragged = static_cast<int>(std::find(ragged_names_.begin(), ragged_names_.end(), in.name) - ragged_names_.begin());
      if (!in.ragged && name == in.name) bindings_.push_back({c, Part::kDense, -1});
      if (in.ragged && name == in.name + ".values") bindings_.push_back({c, Part::kValues, ragged});
      if (in.ragged && name == in.name + ".offsets") bindings_.push_back({c, Part::kOffsets, ragged});
    }
  }
  RANKD_CHECK(bindings_.size() == graph_.inputs.size());
  for (const InputConfig& in : config_.inputs) {
    input_signature_.push_back({in.name, in.dtype, in.dims, in.scope == InputScope::kUser, in.ragged,
                                in.ragged ? in.max_length : 0});
  }
  for (const OutputConfig& out : config_.outputs) {
    OutputSignature o{out.name, DType::kInvalid};
    for (int id : graph_.outputs) {
      if (graph_.values[static_cast<size_t>(id)].name == out.name) o.dtype = graph_.values[static_cast<size_t>(id)].dtype;
    }
    output_signature_.push_back(o);
  }
  auto warm = Infer(ExampleRequest(2));
  if (!warm.ok()) return warm.status().WithContext("warm-up failed");
  return Status::Ok();
}

InferRequest Model::ExampleRequest(int64_t rows) const {
  InferRequest r;
  r.id = "warm-up";
  for (const InputConfig& in : config_.inputs) {
    InferInput x;
    x.name = in.name;
    int64_t n = in.scope == InputScope::kUser ? 1 : rows;
    if (in.ragged) {
      x.data = Tensor::Zeros(in.dtype, {n});
      x.lengths.assign(static_cast<size_t>(n), 1);
    } else {
      Shape s{n};
      for (int64_t d : in.dims) s.push_back(d < 0 ? 1 : d);
      x.data = Tensor::Zeros(in.dtype, s);
    }
    r.inputs.push_back(std::move(x));
  }
  return r;
}

namespace {

// Repeats each of the `rows` rows of `t` (row_bytes each) `times` times: user rows to candidates.
Tensor RepeatRows(const Tensor& t, int64_t times) {
  Shape s = t.shape();
  s[0] *= times;
  Tensor out = Tensor::Zeros(t.dtype(), s);
  size_t bytes = t.bytes();
  for (int64_t i = 0; i < times; ++i) {
    std::memcpy(static_cast<uint8_t*>(out.raw()) + static_cast<size_t>(i) * bytes, t.raw(), bytes);
  }
  return out;
}

Status CheckFinite(const InferInput& in) {
  const Tensor& t = in.data;
  auto check = [&](const auto* p) -> Status {
    for (int64_t i = 0; i < t.size(); ++i) {
      if (!std::isfinite(p[i])) {
        return InvalidArgument("input '" + in.name + "' holds a NaN or infinite value at element " + std::to_string(i));
      }
    }
    return Status::Ok();
  };
  if (t.dtype() == DType::kF32) return check(t.data<float>());
  if (t.dtype() == DType::kF64) return check(t.data<double>());
  return Status::Ok();
}

}  // namespace

Status Model::BuildGraphInputs(const InferRequest& request, std::vector<Tensor>& inputs,
                               std::vector<int64_t>& ragged_max_lengths) const {
  std::vector<const InferInput*> given(config_.inputs.size(), nullptr);
  for (const InferInput& in : request.inputs) {
    auto it = std::find_if(config_.inputs.begin(), config_.inputs.end(), [&](const InputConfig& c) { return c.name == in.name; });
    if (it == config_.inputs.end()) return InvalidArgument("unknown input '" + in.name + "' for model '" + name() + "'");
    size_t c = static_cast<size_t>(it - config_.inputs.begin());
    if (given[c]) return InvalidArgument("input '" + in.name + "' is given twice");
    given[c] = &in;
  }
  // Rows per input; the candidate count N comes from item-scope inputs.
  std::vector<int64_t> rows(config_.inputs.size());
  int64_t n = -1;
  for (size_t c = 0; c < config_.inputs.size(); ++c) {
    const InputConfig& cfg = config_.inputs[c];
    const InferInput* in = given[c];
    if (!in) return InvalidArgument("input '" + cfg.name + "' is missing");
    const Tensor& t = in->data;
    if (t.dtype() != cfg.dtype) {
      return InvalidArgument("input '" + cfg.name + "' must be " + DTypeName(cfg.dtype) + ", got " + DTypeName(t.dtype()));
    }
    RETURN_IF_ERROR(CheckFinite(*in));
    if (cfg.ragged) {
      if (!in->lengths.empty() || t.rank() == 1) {
        if (t.rank() != 1) return InvalidArgument("ragged input '" + cfg.name + "' with lengths must be flat values");
        int64_t total = 0;
        for (int64_t len : in->lengths) {
          if (len < 0 || len > cfg.max_length) {
            return InvalidArgument("ragged input '" + cfg.name + "' has a row of length " + std::to_string(len) +
                                   " (allowed 0 to " + std::to_string(cfg.max_length) + ")");
          }
          total += len;
        }
        if (total != t.size()) {
          return InvalidArgument("ragged input '" + cfg.name + "': lengths add up to " + std::to_string(total) +
                                 " but " + std::to_string(t.size()) + " values were sent");
        }
        rows[c] = static_cast<int64_t>(in->lengths.size());
      } else {
        if (t.rank() != 2) return InvalidArgument("ragged input '" + cfg.name + "' must be [rows, length] or flat values with lengths");
        if (t.dim(1) > cfg.max_length) return InvalidArgument("ragged input '" + cfg.name + "' rows exceed max_length " + std::to_string(cfg.max_length));
        rows[c] = t.dim(0);
      }
    } else {
      if (t.rank() != static_cast<int64_t>(cfg.dims.size()) + 1) {
        return InvalidArgument("input '" + cfg.name + "' must have shape [rows" + std::string(cfg.dims.empty() ? "" : ", ") +
                               ShapeToString(cfg.dims).substr(1) + ", got " + ShapeToString(t.shape()));
      }
      for (size_t d = 0; d < cfg.dims.size(); ++d) {
        if (cfg.dims[d] >= 0 && t.dim(static_cast<int64_t>(d) + 1) != cfg.dims[d]) {
          return InvalidArgument("input '" + cfg.name + "' must have shape [rows, " + ShapeToString(cfg.dims).substr(1) +
                                 ", got " + ShapeToString(t.shape()));
        }
      }
      rows[c] = t.dim(0);
    }
    if (cfg.scope == InputScope::kItem) {
      if (n >= 0 && rows[c] != n) {
        return InvalidArgument("input '" + cfg.name + "' has " + std::to_string(rows[c]) + " rows; other inputs have " + std::to_string(n));
      }
      n = rows[c];
    }
  }
  if (n < 0) n = rows.empty() ? 0 : rows[0];  // only user-scope inputs
  if (n == 0) return InvalidArgument("the request has no rows (empty candidate list)");
  int64_t limit = config_.max_batch_size > 0 ? config_.max_batch_size : options_.max_rows;
  if (n > limit) {
    return ResourceExhausted("the request has " + std::to_string(n) + " rows; the limit is " + std::to_string(limit));
  }
  for (size_t c = 0; c < config_.inputs.size(); ++c) {
    if (config_.inputs[c].scope == InputScope::kUser && rows[c] != 1 && rows[c] != n) {
      return InvalidArgument("user input '" + config_.inputs[c].name + "' must have 1 row (or one per candidate), got " +
                             std::to_string(rows[c]));
    }
  }
  // Dense tensors and ragged (values, offsets), with user rows repeated to every candidate.
  inputs.clear();
  ragged_max_lengths.assign(ragged_names_.size(), 0);
  for (const Binding& b : bindings_) {
    const InferInput& in = *given[b.config_index];
    int64_t repeat = rows[b.config_index] == n ? 1 : n;
    if (b.part == Part::kDense) {
      inputs.push_back(repeat == 1 ? Tensor::View(in.data.dtype(), in.data.shape(), const_cast<void*>(in.data.raw()))
                                   : RepeatRows(in.data, repeat));
      continue;
    }
    // Ragged: lengths per row (from the padded form: the row width), then repeated.
    std::vector<int64_t> lengths = in.lengths;
    Tensor values = in.data;
    if (lengths.empty() && in.data.rank() == 2) {
      lengths.assign(static_cast<size_t>(in.data.dim(0)), in.data.dim(1));
      values = Tensor::View(in.data.dtype(), {in.data.size()}, const_cast<void*>(in.data.raw()));
    }
    if (b.part == Part::kValues) {
      inputs.push_back(repeat == 1 ? Tensor::View(values.dtype(), values.shape(), const_cast<void*>(values.raw()))
                                   : RepeatRows(values, repeat));
    } else {
      Tensor offsets = Tensor::Zeros(DType::kI64, {n + 1});
      int64_t* o = offsets.data<int64_t>();
      int64_t max_len = 0;
      for (int64_t r = 0; r < n; ++r) {
        int64_t len = lengths[static_cast<size_t>(r % static_cast<int64_t>(lengths.size()))];
        o[r + 1] = o[r] + len;
        max_len = std::max(max_len, len);
      }
      ragged_max_lengths[static_cast<size_t>(b.ragged_index)] = max_len;
      inputs.push_back(std::move(offsets));
    }
  }
  return Status::Ok();
}

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
  ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, Plan::Build(graph_, graph_inputs, options));
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

StatusOr<std::shared_ptr<const Plan>> Model::PlanForRequest(const InferRequest& request) const {
  std::vector<Tensor> inputs;
  std::vector<int64_t> ragged_max_lengths;
  RETURN_IF_ERROR(BuildGraphInputs(request, inputs, ragged_max_lengths));
  std::vector<TensorMeta> metas;
  for (const Tensor& t : inputs) metas.push_back({t.dtype(), t.shape(), nullptr});
  return PlanFor(metas, ragged_max_lengths);
}

StatusOr<std::unique_ptr<Executor>> Model::AcquireExecutor() const {
  {
    std::unique_lock<std::mutex> lock(mu_);
    executor_freed_.wait(lock, [&] {
      return !idle_executors_.empty() || max_executors_ == 0 || executors_created_ < max_executors_;
    });
    if (!idle_executors_.empty()) {
      std::unique_ptr<Executor> e = std::move(idle_executors_.back());
      idle_executors_.pop_back();
      return e;
    }
    ++executors_created_;
  }
  auto created = backend_->NewExecutor(resources_);
  if (!created.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    --executors_created_;
    executor_freed_.notify_one();
  }
  return created;
}

void Model::ReleaseExecutor(std::unique_ptr<Executor> executor) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle_executors_.push_back(std::move(executor));
  }
  executor_freed_.notify_one();
}

StatusOr<std::vector<InferOutput>> Model::Infer(const InferRequest& request) const {
  for (const std::string& out : request.outputs) {
    if (!std::any_of(config_.outputs.begin(), config_.outputs.end(), [&](const OutputConfig& o) { return o.name == out; })) {
      return InvalidArgument("unknown output '" + out + "' for model '" + name() + "'");
    }
  }
  std::vector<Tensor> inputs;
  std::vector<int64_t> ragged_max_lengths;
  RETURN_IF_ERROR(BuildGraphInputs(request, inputs, ragged_max_lengths));
  std::vector<TensorMeta> metas;
  for (const Tensor& t : inputs) metas.push_back({t.dtype(), t.shape(), nullptr});
  ASSIGN_OR_RETURN(std::shared_ptr<const Plan> plan, PlanFor(metas, ragged_max_lengths));

  ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, AcquireExecutor());
  auto result = executor->Run(*plan, inputs);
  ReleaseExecutor(std::move(executor));
  if (!result.ok()) return result.status();
  std::vector<InferOutput> outputs;
  for (size_t i = 0; i < graph_.outputs.size(); ++i) {
    const std::string& out_name = graph_.values[static_cast<size_t>(graph_.outputs[i])].name;
    bool wanted = request.outputs.empty()
                      ? std::any_of(config_.outputs.begin(), config_.outputs.end(), [&](const OutputConfig& o) { return o.name == out_name; })
                      : std::find(request.outputs.begin(), request.outputs.end(), out_name) != request.outputs.end();
    if (wanted) outputs.push_back({out_name, std::move((*result)[i])});
  }
  return outputs;
}

}  // namespace rankd
