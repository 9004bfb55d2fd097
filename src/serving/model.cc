#include "serving/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <future>
#include <numeric>

#include "backend/backend.h"
#include "common/parallel.h"
#include "compile/passes.h"
#include "model/onnx_import.h"
#include "runtime/op_profile.h"
#include "serving/cost_model.h"

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
  ASSIGN_OR_RETURN(report_.lowered_splits, LowerSplits(graph_));  // not a fusion: there is no Split kernel
  ASSIGN_OR_RETURN(report_.folded_nodes, FoldConstants(graph_));
  report_.removed_nodes = RemoveDeadNodes(graph_);
  if (options_.fusion) {
    report_.fused_embedding_bags = FuseMaskedEmbeddingBags(graph_);
    report_.fused_layer_norms = FuseDecomposedLayerNorms(graph_);
  }
  for (const InputConfig& in : config_.inputs) {
    if (in.ragged) ragged_names_.push_back(in.name);
  }
  report_.ragged_inputs = static_cast<int>(ragged_names_.size());
  RETURN_IF_ERROR(ApplyRaggedInputs(graph_, ragged_names_));
  if (!options_.table_dtype.empty()) {
    DType d = DTypeFromName(options_.table_dtype).value_or(DType::kInvalid);
    if (d != DType::kF32 && d != DType::kBF16 && d != DType::kF16) return InvalidArgument("table dtype must be FP32, BF16 or FP16");
    config_.table_dtype = d;
  }
  report_.narrowed_tables = StoreTablesAs(graph_, config_.table_dtype);  // before hoisting copies the graph
  BindGraphInputs();
  RETURN_IF_ERROR(SplitProducts());
  if (options_.fusion) report_.fused_epilogues = FuseGemmEpilogues(graph_);  // after the split: it reads bare products
  Graph unhoisted = graph_;  // shares the constants; kept until the hoisted graph is checked
  RETURN_IF_ERROR(StartHoisting().WithContext("user-side hoisting"));
  if (options_.fusion) {  // after hoisting, which runs user-side bags once per user before any concat
    report_.fused_embedding_concats = FuseEmbeddingConcats(graph_);
    FuseEmbeddingConcats(unhoisted);
  }
  RETURN_IF_ERROR(FuseAfterHoisting());
  backend_ = options_.backend ? options_.backend : &CpuBackend();
  max_executors_ = options_.executors > 0 ? options_.executors : backend_ == &CpuBackend() ? 0 : 4;
  RETURN_IF_ERROR(backend_->CheckGraph(graph_));
  ASSIGN_OR_RETURN(Precision precision, ParsePrecision(options_.precision.empty() ? config_.precision : options_.precision));
  ASSIGN_OR_RETURN(resources_, backend_->PrepareModel(graph_, precision));
  if (hoisted_) {
    std::string why = CheckHoisting();
    if (!why.empty()) {  // a rule proved something false: run the graph as written
      report_.hoisting = "off: " + why;
      report_.hoisting_gathers.clear();
      hoisted_ = false;
      graph_ = std::move(unhoisted);
      BindGraphInputs();
      RETURN_IF_ERROR(FuseAfterHoisting());
      RETURN_IF_ERROR(backend_->CheckGraph(graph_));
      {
        std::lock_guard<std::mutex> lock(mu_);
        plans_.clear();
        plan_order_.clear();
      }
      ASSIGN_OR_RETURN(resources_, backend_->PrepareModel(graph_, precision));
    }
  }
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
  for (const Binding& b : bindings_) input_kinds_.push_back(b.kind);
  for (int id : graph_.outputs) output_names_.push_back(graph_.values[static_cast<size_t>(id)].name);
  auto warm = Infer(ExampleRequest(2));
  if (!warm.ok()) return warm.status().WithContext("warm-up failed");
  RETURN_IF_ERROR(StartBuckets().WithContext("shape buckets"));
  if (config_.batching.enabled) RETURN_IF_ERROR(StartBatching().WithContext("batching"));
  return Status::Ok();
}

InferRequest Model::ExampleRequest(int64_t rows, int64_t ragged_length) const {
  InferRequest r;
  r.id = "warm-up";
  for (const InputConfig& in : config_.inputs) {
    InferInput x;
    x.name = in.name;
    int64_t n = in.scope == InputScope::kUser ? 1 : rows;
    if (in.ragged) {
      int64_t len = std::min(ragged_length, in.max_length);
      x.data = Tensor::Zeros(in.dtype, {n * len});
      x.lengths.assign(static_cast<size_t>(n), len);
    } else {
      Shape s{n};
      for (int64_t d : in.dims) s.push_back(d < 0 ? 1 : d);
      x.data = Tensor::Zeros(in.dtype, s);
    }
    r.inputs.push_back(std::move(x));
  }
  return r;
}

void RandomizeFloats(InferRequest& request, uint32_t seed) {
  for (InferInput& in : request.inputs) {
    if (in.data.dtype() != DType::kF32) continue;
    for (int64_t i = 0; i < in.data.size(); ++i) {
      seed = seed * 1664525u + 1013904223u;
      in.data.data<float>()[i] = static_cast<float>(seed >> 8) / static_cast<float>(1 << 24);
    }
  }
}

double Model::AgreementTolerance() const { return config_.precision == "fp32" ? 1e-3 : 3e-2; }

namespace {

Status CheckFinite(const InferInput& in) {
  const Tensor& t = in.data;
  auto check = [&](const auto* p) -> Status {
    const int64_t n = t.size();
    bool finite = true;
    for (int64_t i = 0; i < n; ++i) finite &= static_cast<bool>(std::isfinite(p[i]));  // no branch: vectorises
    if (finite) return Status::Ok();
    for (int64_t i = 0; i < n; ++i) {
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

Status Model::BuildGraphInputs(const InferRequest& request, PreparedRequest& prepared) const {
  std::vector<Tensor>& inputs = prepared.inputs;
  std::vector<int64_t>& ragged_max_lengths = prepared.ragged_max_lengths;
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
  std::vector<size_t> with_lengths;  // ragged inputs sent as flat values with lengths
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
        with_lengths.push_back(c);  // lengths checked below, on several threads
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
  // Users: one, or one per candidate when any user input has a row per candidate.
  int64_t users = 1;
  for (size_t c = 0; c < config_.inputs.size(); ++c) {
    if (config_.inputs[c].scope == InputScope::kUser && rows[c] != 1 && rows[c] != n) {
      return InvalidArgument("user input '" + config_.inputs[c].name + "' must have 1 row (or one per candidate), got " +
                             std::to_string(rows[c]));
    }
    if (config_.inputs[c].scope == InputScope::kUser) users = std::max(users, rows[c]);
  }
  // Dense tensors and ragged (values, offsets). User rows go once per user to a hoisted graph
  // (with each candidate's user row), else repeated to every candidate.
  prepared.rows = n;
  prepared.users = hoisted_ ? users : 0;
  prepared.sequence_elements = 0;
  inputs.clear();
  ragged_max_lengths.assign(ragged_names_.size(), 0);
  // Ragged offsets and the checks of lengths (each in range, adding up to the values sent), one
  // pass over each input's lengths, inputs on several threads (W1 at 32,768 pairs: 26 inputs of
  // 32,768 rows). The first failing input in config order is reported.
  constexpr size_t kNoInput = ~size_t{0};
  struct LengthsJob {
    size_t config;
    bool padded;
    int64_t rows;          // of the graph input
    int ragged;            // index into ragged_max_lengths
    size_t input;          // the offsets' graph input; kNoInput: only check the lengths
    Status status;
  };
  std::vector<LengthsJob> jobs;
  for (const Binding& b : bindings_) {
    if (b.kind.part == GraphInputKind::kRequestIndex) {
      Tensor index = Tensor::Zeros(DType::kI64, {n});
      if (users > 1) std::iota(index.data<int64_t>(), index.data<int64_t>() + n, int64_t{0});
      inputs.push_back(std::move(index));
      continue;
    }
    const InferInput& in = *given[b.config_index];
    int64_t want = b.kind.user ? users : n;  // rows this graph input has
    int64_t repeat = rows[b.config_index] == want ? 1 : want;
    if (b.kind.part == GraphInputKind::kDense) {
      inputs.push_back(repeat == 1 ? Tensor::View(in.data.dtype(), in.data.shape(), const_cast<void*>(in.data.raw()))
                                   : RepeatRows(in.data, repeat));
      continue;
    }
    // Ragged: lengths per row (flat values with lengths, or the padded form's row width),
    // repeated when one user row goes to every candidate.
    bool padded = in.lengths.empty() && in.data.rank() == 2;
    if (b.kind.part == GraphInputKind::kValues) {
      Tensor values = padded ? Tensor::View(in.data.dtype(), {in.data.size()}, const_cast<void*>(in.data.raw())) : in.data;
      inputs.push_back(repeat == 1 ? values : RepeatRows(values, repeat));
      prepared.sequence_elements += inputs.back().size();
    } else {
      jobs.push_back({b.config_index, padded, want, b.kind.ragged, inputs.size(), Status::Ok()});
      inputs.push_back(Tensor::Empty(DType::kI64, {want + 1}));
    }
  }
  for (size_t c : with_lengths) {
    if (std::none_of(jobs.begin(), jobs.end(), [&](const LengthsJob& j) { return j.config == c; })) {
      jobs.push_back({c, false, 0, -1, kNoInput, Status::Ok()});
    }
  }
  ParallelFor(static_cast<int64_t>(jobs.size()), n, [&](int64_t first, int64_t last) {
    for (int64_t j = first; j < last; ++j) {
      LengthsJob& job = jobs[static_cast<size_t>(j)];
      const InputConfig& cfg = config_.inputs[job.config];
      const InferInput& in = *given[job.config];
      int64_t* o = job.input == kNoInput ? nullptr : inputs[job.input].data<int64_t>();
      int64_t max_len = 0;
      if (job.padded) {
        max_len = job.rows > 0 ? in.data.dim(1) : 0;
        for (int64_t r = 0; r <= job.rows; ++r) o[r] = r * max_len;
      } else {
        const std::vector<int64_t>& lengths = in.lengths;
        const int64_t limit = cfg.max_length, count = static_cast<int64_t>(lengths.size());
        bool in_range = true;
        int64_t total = 0;
        if (o && count != job.rows) {  // the one user row, repeated to every row
          max_len = job.rows > 0 ? lengths[0] : 0;
          in_range = lengths[0] >= 0 && lengths[0] <= limit;
          total = lengths[0];
          for (int64_t r = 0; r <= job.rows; ++r) o[r] = r * lengths[0];
        } else {
          for (int64_t r = 0; r < count; ++r) {  // no branch on a bad length: vectorises
            int64_t len = lengths[static_cast<size_t>(r)];
            in_range &= len >= 0 && len <= limit;
            max_len = std::max(max_len, len);
            total += len;
            if (o) o[r + 1] = total;
          }
          if (o) o[0] = 0;
        }
        if (!in_range) {
          int64_t len = *std::find_if(lengths.begin(), lengths.end(), [&](int64_t l) { return l < 0 || l > limit; });
          job.status = InvalidArgument("ragged input '" + cfg.name + "' has a row of length " + std::to_string(len) +
                                       " (allowed 0 to " + std::to_string(limit) + ")");
        } else if (total != in.data.size()) {
          job.status = InvalidArgument("ragged input '" + cfg.name + "': lengths add up to " + std::to_string(total) +
                                       " but " + std::to_string(in.data.size()) + " values were sent");
        }
      }
      if (o) ragged_max_lengths[static_cast<size_t>(job.ragged)] = max_len;
    }
  });
  std::sort(jobs.begin(), jobs.end(), [](const LengthsJob& a, const LengthsJob& b) { return a.config < b.config; });
  for (const LengthsJob& job : jobs) RETURN_IF_ERROR(job.status);
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
  std::lock_guard<std::mutex> lock(mu_);
  if (!created.ok()) {
    --executors_created_;
    executor_freed_.notify_one();
  } else {
    all_executors_.push_back(created->get());
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

namespace {

// A request waiting in the batcher; its caller blocks on `done`.
struct QueuedInfer : BatchTask {
  const PreparedRequest* prepared = nullptr;
  InferStats* stats = nullptr;
  std::promise<StatusOr<std::vector<Tensor>>> done;
  void Fail(const Status& status) override { done.set_value(status); }
};

}  // namespace

void Model::RunBatch(std::vector<std::unique_ptr<BatchTask>> batch) const {
  BatchClock::time_point now = BatchClock::now();
  std::vector<QueuedInfer*> tasks;
  std::vector<const PreparedRequest*> parts;
  std::vector<int64_t> rows;
  for (auto& t : batch) {
    auto* task = static_cast<QueuedInfer*>(t.get());
    tasks.push_back(task);
    parts.push_back(task->prepared);
    rows.push_back(task->prepared->rows);
    if (task->stats) {
      task->stats->queue_us = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(now - task->info.enqueued).count());
      task->stats->batch_requests = static_cast<int>(batch.size());
      task->stats->execution = tasks.size() == 1;
    }
  }
  auto each_alone = [&] {
    for (size_t k = 0; k < tasks.size(); ++k) {
      if (tasks[k]->stats) {
        tasks[k]->stats->batch_requests = 1;
        tasks[k]->stats->execution = true;
      }
      tasks[k]->done.set_value(RunPrepared(*parts[k]));
    }
  };
  if (tasks.size() == 1) {
    tasks[0]->done.set_value(RunPrepared(*parts[0]));
    return;
  }
  if (!MergeNow(MergedSizes(parts))) {
    each_alone();
    return;
  }
  auto result = RunPrepared(MergeRequests(parts, input_kinds_));
  auto split = result.ok() ? SplitRows(*result, rows, output_names_)
                           : StatusOr<std::vector<std::vector<Tensor>>>(result.status());
  if (split.ok()) {
    for (size_t k = 0; k < tasks.size(); ++k) tasks[k]->done.set_value(std::move((*split)[k]));
    return;
  }
  // The batch failed (say an id out of range found on the device): each request runs alone, so
  // only the one at fault fails.
  each_alone();
}

namespace {

double MicrosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Status Model::StartBatching() {
  const BatchingConfig& b = config_.batching;
  // Merged requests must score as they do alone: two requests of random dense values and
  // different ragged lengths, alone and merged.
  std::vector<InferRequest> examples = {ExampleRequest(2, 1), ExampleRequest(3, 2)};
  RandomizeFloats(examples[0], 12345);
  RandomizeFloats(examples[1], 54321);
  std::vector<PreparedRequest> prepared(examples.size());
  std::vector<std::vector<Tensor>> alone;
  for (size_t k = 0; k < examples.size(); ++k) {
    RETURN_IF_ERROR(BuildGraphInputs(examples[k], prepared[k]));
    ASSIGN_OR_RETURN(std::vector<Tensor> out, RunPrepared(prepared[k]));
    alone.push_back(std::move(out));
  }
  ASSIGN_OR_RETURN(std::vector<Tensor> merged, RunPrepared(MergeRequests({&prepared[0], &prepared[1]}, input_kinds_)));
  ASSIGN_OR_RETURN(auto split, SplitRows(merged, {prepared[0].rows, prepared[1].rows}, output_names_));
  double tolerance = AgreementTolerance();
  for (size_t k = 0; k < split.size(); ++k) {
    for (size_t o = 0; o < split[k].size(); ++o) {
      if (!OutputsAgree(alone[k][o], split[k][o], tolerance)) {
        return InvalidArgument("output '" + output_names_[o] +
                                  "' changes when requests are merged: the graph mixes rows of a batch, so it "
                                  "cannot be batched (remove the batching section)");
      }
    }
  }

  BatchPolicyOptions& p = batch_policy_;
  int64_t request_limit = config_.max_batch_size > 0 ? config_.max_batch_size : options_.max_rows;
  p.max_batch_rows = b.max_batch_size > 0 ? b.max_batch_size : request_limit;
  p.max_queue_delay = std::chrono::microseconds(b.max_queue_delay_microseconds);
  p.max_enqueued = static_cast<size_t>(b.max_queue_size);
  p.preferred_rows = b.preferred_batch_size;
  FittedCost fit;
  if (b.cost_per_row < 0 || b.cost_per_sequence_element < 0 || b.cost_per_request < 0 || b.cost_budget < 0) {
    // Time batches of growing size (and, with ragged inputs, growing lengths) on this backend.
    std::vector<CostSample> samples;
    auto start = std::chrono::steady_clock::now();
    auto measure = [&](int64_t rows, int64_t length) -> Status {
      InferRequest request = ExampleRequest(rows, length);  // `batch` views its tensors
      PreparedRequest batch;
      RETURN_IF_ERROR(BuildGraphInputs(request, batch));
      RETURN_IF_ERROR(RunPrepared(batch).status());  // builds the plan, grows the workspace
      std::vector<double> times;
      for (int i = 0; i < 3; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        RETURN_IF_ERROR(RunPrepared(batch).status());
        times.push_back(MicrosSince(t0));
      }
      std::sort(times.begin(), times.end());
      samples.push_back({batch.rows, batch.sequence_elements, times[1]});
      return Status::Ok();
    };
    for (int64_t rows = 1; rows <= p.max_batch_rows; rows *= 4) {
      RETURN_IF_ERROR(measure(rows, 1));
      if (samples.back().micros > 20000 || MicrosSince(start) > 1e6) break;
    }
    if (!ragged_names_.empty()) {
      for (int64_t length : {8, 64, 256}) {
        RETURN_IF_ERROR(measure(std::min<int64_t>(16, p.max_batch_rows), length));
        if (samples.back().micros > 20000) break;
      }
    }
    fit = FitCost(samples);
  }
  p.cost_per_row = b.cost_per_row >= 0 ? b.cost_per_row : fit.per_row;
  p.cost_per_seq = b.cost_per_sequence_element >= 0 ? b.cost_per_sequence_element : fit.per_sequence_element;
  p.cost_per_request = b.cost_per_request >= 0 ? b.cost_per_request : fit.per_request;
  p.cost_budget = b.cost_budget > 0 ? b.cost_budget : fit.budget;

  BatcherOptions options;
  options.policy = p;
  options.executors = b.executors > 0 ? b.executors : max_executors_ > 0 ? max_executors_ : 2;
  batcher_ = std::make_unique<Batcher>(options, [this](std::vector<std::unique_ptr<BatchTask>> batch) {
    RunBatch(std::move(batch));
  });
  return Status::Ok();
}

StatusOr<std::vector<InferOutput>> Model::Infer(const InferRequest& request, InferStats* stats) const {
  for (const std::string& out : request.outputs) {
    if (!std::any_of(config_.outputs.begin(), config_.outputs.end(), [&](const OutputConfig& o) { return o.name == out; })) {
      return InvalidArgument("unknown output '" + out + "' for model '" + name() + "'");
    }
  }
  PreparedRequest prepared;
  auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(BuildGraphInputs(request, prepared));
  if (OpProfile::enabled()) {
    OpProfile::Record("(request turned into graph inputs)",
                      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  StatusOr<std::vector<Tensor>> result = Internal("not run");
  if (!batcher_) {
    result = RunPrepared(prepared);
  } else {
    const BatchingConfig& b = config_.batching;
    if (request.priority > b.priority_levels) {
      return InvalidArgument("priority " + std::to_string(request.priority) + " is outside the model's " +
                             std::to_string(b.priority_levels) + " priority levels");
    }
    auto task = std::make_unique<QueuedInfer>();
    task->prepared = &prepared;
    task->stats = stats;
    task->info.rows = prepared.rows;
    task->info.seq_elements = prepared.sequence_elements;
    int level = request.priority > 0 ? request.priority
                : b.default_priority_level > 0 ? b.default_priority_level : b.priority_levels;
    task->info.priority = -level;  // level 1 is the highest
    task->info.enqueued = BatchClock::now();
    int64_t timeout = request.timeout_us > 0 ? request.timeout_us : b.default_timeout_microseconds;
    if (timeout > 0) task->info.deadline = task->info.enqueued + std::chrono::microseconds(timeout);
    auto done = task->done.get_future();
    std::unique_ptr<BatchTask> queued = std::move(task);
    RETURN_IF_ERROR(batcher_->Enqueue(queued));
    result = done.get();
  }
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
