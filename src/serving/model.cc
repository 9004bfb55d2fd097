// Model: loading (import, passes, executors, buckets, batching) and scoring a request.
#include "serving/model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>

#include "common/log.h"
#include "model/onnx_import.h"
#include "model/ops/keyed_rows.h"
#include "runtime/backends.h"
#include "runtime/op_profile.h"

namespace rankd {
namespace {

// A request run alone waits for an executor until its timeout (microseconds, Triton's `timeout`
// parameter, or what is left of a gRPC call's deadline) passes: then DeadlineExceeded, unrun.
void SetDeadline(const InferRequest& request, PreparedRequest& prepared) {
  if (request.timeout_us > 0) {
    prepared.deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(request.timeout_us);
  }
}

}  // namespace

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
  ModelConfig config;
  if (options.config) {
    config = *options.config;
  } else {
    RANKD_ASSIGN_OR_RETURN(config, LoadModelConfig(model_dir));
  }
  if (config.name.empty()) config.name = fs::path(model_dir).filename().string();
  if (!config.unused.empty()) {  // a Triton config.pbtxt: what it sets that rankd does not use, in one warning
    std::string fields;
    for (const std::string& u : config.unused) fields += (fields.empty() ? "" : "; ") + u;
    LogWarning("model '" + config.name + "' version " + std::to_string(version) +
               ": its Triton config (config.pbtxt or a load's override) sets what rankd does not use: " + fields);
  }
  std::string onnx = (fs::path(model_dir) / std::to_string(version) / "model.onnx").string();
  RANKD_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadFile(onnx, std::move(config), options));
  model->version_ = version;
  return model;
}

StatusOr<std::unique_ptr<Model>> Model::LoadFile(const std::string& onnx_path, ModelConfig config,
                                                 const ModelOptions& options) {
  if (!options.backend) return InvalidArgument("no backend given");
  std::unique_ptr<Model> model(new Model());
  model->options_ = options;
  if (config.name.empty()) config.name = fs::path(onnx_path).stem().string();
  const std::string name = config.name;
  RANKD_ASSIGN_OR_RETURN(Graph graph, ImportOnnxFile(onnx_path));
  Status s = model->Prepare(std::move(graph), std::move(config));
  if (s.ok()) s = model->CheckServable();  // a table changed while the load read it
  if (!s.ok()) return s.WithContext("model '" + name + "'");
  model->counters_at_load_ = model->runner_->ReadCounters();  // what the load's own runs counted
  return model;
}

Status Model::MakeRunner() {
  const CompiledModel& c = *compiled_;
  TableBudget budget;
  config_.table_gpu_budget_mb = options_.table_gpu_budget_mb.value_or(config_.table_gpu_budget_mb);
  const int64_t mb = config_.table_gpu_budget_mb;
  budget.gpu_bytes = mb < 0 ? -1 : mb << 20;
  for (const auto& [table, tier] : config_.table_tiers) {
    std::vector<int> gpus;
    RANKD_ASSIGN_OR_RETURN(budget.tiers[table], ParseTablePlace(tier, &gpus));
    if (!gpus.empty()) budget.gpus[table] = gpus;
  }
  budget.cache_rows = config_.table_cache_rows;
  if (options_.table_cache_fraction) {
    for (const TableInfo& t : FindTables(c.graph())) {
      if (!t.lookups_only) continue;
      budget.cache_rows[t.name] =
          std::max<int64_t>(1, static_cast<int64_t>(*options_.table_cache_fraction * static_cast<double>(t.rows())));
      budget.tiers.erase(t.name);
    }
  }
  if (options_.tables_on_disk) {
    config_.table_disk_dir = *options_.tables_on_disk;
    for (const TableInfo& t : FindTables(c.graph())) {
      if (!t.lookups_only || !DiskTables::CanServe(c.graph(), t).ok()) continue;
      budget.tiers[t.name] = TableTier::kDisk;
      // With a cache fraction too, a table whose lookups can read a GPU cache keeps it, in front of its host cache.
      if (!options_.table_cache_fraction || !DiskTables::CanCacheOnGpu(c.graph(), t).ok())
        budget.cache_rows.erase(t.name);
    }
  }
  config_.table_disk_cache_mb = options_.table_disk_cache_mb.value_or(config_.table_disk_cache_mb);
  config_.table_hotness_snapshot = options_.table_hotness_snapshot.value_or(config_.table_hotness_snapshot);
  config_.table_host_budget_mb = options_.table_host_budget_mb.value_or(config_.table_host_budget_mb);
  if (config_.table_host_budget_mb >= 0) {
    if (config_.table_disk_cache_mb >= 0)
      return InvalidArgument(
          "tables.disk_cache_mb and tables.host_budget_mb both size the host caches of tables "
          "on disk: give one");
    budget.host_bytes = config_.table_host_budget_mb << 20;
  }
  std::vector<const Backend*> backends = options_.replicas;
  if (backends.empty()) {
    const GpuSet& gpus = config_.gpus.empty() ? options_.gpus : config_.gpus;
    RANKD_ASSIGN_OR_RETURN(backends, FindReplicaBackends(*options_.backend, gpus));
  }
  if (config_.table_shard_over_gpus && backends.size() >= 2 && backends[0]->device_kind() == DeviceKind::kCuda) {
    for (const Backend* b : backends) budget.shard_gpus.push_back(b->device());
  }
  RANKD_ASSIGN_OR_RETURN(tables_, PlaceTables(c.graph(), budget));
  std::unique_ptr<DiskTables> disk;
  if (std::any_of(tables_.begin(), tables_.end(), [](const TableInfo& t) { return t.tier == TableTier::kDisk; })) {
    DiskTablesOptions on_disk;
    on_disk.directory = config_.table_disk_dir;
    if (!config_.table_hotness_snapshot.empty()) on_disk.snapshot_path = config_.table_hotness_snapshot + ".disk";
    on_disk.cache_bytes = budget.host_bytes >= 0            ? DiskCacheBytes(tables_, budget)
                          : config_.table_disk_cache_mb < 0 ? -1
                                                            : config_.table_disk_cache_mb << 20;
    const bool gpu_caches = std::any_of(tables_.begin(), tables_.end(), [](const TableInfo& t) {
      return t.tier == TableTier::kDisk && t.cache_rows > 0;
    });
    if (gpu_caches && backends[0]->device_kind() == DeviceKind::kCuda) {  // on the host, ignored as a cache is
      if (backends.size() > 1)
        return InvalidArgument("tables: a GPU cache in front of a table on disk serves one GPU, and the model has " +
                               std::to_string(backends.size()) + " replicas");
      const Backend* gpu = backends[0];
      on_disk.make_slots = [gpu](int64_t slots, int64_t row_bytes) { return gpu->CreateRowSlots(slots, row_bytes); };
    }
    RANKD_RETURN_IF_ERROR(compiled_->EditGraph([&](Graph& graph) -> Status {
      RANKD_ASSIGN_OR_RETURN(disk, DiskTables::Open(graph, tables_, on_disk));
      return Status::Ok();
    }));
  }
  // A version loaded beside this one shares its table caches (the group is the model's name).
  PrepareOptions prepare{c.precision(), ToPlacement(tables_), config_.name};
  if (disk) prepare.staged_row_slots = disk->gpu_row_slots();
  CacheKeeperOptions keeper;
  keeper.snapshot_path = config_.table_hotness_snapshot;
  RANKD_ASSIGN_OR_RETURN(runner_, PlanRunner::Create(backends, c.graph(), prepare,
                                                     options_.executors > 0 ? options_.executors : config_.executors,
                                                     config_.name, keeper));
  if (disk) runner_->SetDiskTables(std::move(disk));
  return Status::Ok();
}

Status Model::Compile(Graph graph, ModelConfig config) {
  RANKD_ASSIGN_OR_RETURN(compiled_, CompiledModel::Compile(std::move(graph), std::move(config), options_));
  const CompiledModel& c = *compiled_;
  config_ = c.config();
  if (const size_t shared = c.report().shared_constant_bytes; shared > 0) {
    char amount[32];
    std::snprintf(amount, sizeof amount, "%.1f MiB", static_cast<double>(shared) / (1 << 20));
    LogInfo("model '" + config_.name + "': " + amount +
            " of tables and weights held once with a model already loaded (byte for byte the same)");
  }
  if (options_.batching >= 0) config_.batching.enabled = options_.batching == 1;
  if (!config_.gpus.empty() && options_.backend->device_kind() != DeviceKind::kCuda && options_.replicas.empty()) {
    LogWarning("model '" + config_.name + "': gpus: " + GpuSetText(config_.gpus) + " is not used: it runs on the " +
               options_.backend->name() + " backend");
  }
  return Status::Ok();
}

Status Model::Prepare(Graph graph, ModelConfig config) {
  // The CPU route compiles the model as imported a second time (StartRouting).
  std::optional<std::pair<Graph, ModelConfig>> route_source;
  if (config.routing.cpu != CpuRouting::kOff) {
    const Backend* device = options_.replicas.empty() ? options_.backend : options_.replicas[0];
    if (device == &CpuBackend()) {
      LogInfo("model '" + config.name + "': routing.cpu is not used: the model runs on the CPU");
    } else {
      route_source.emplace(graph, config);
    }
  }
  RANKD_RETURN_IF_ERROR(Compile(std::move(graph), std::move(config)));
  if (Status made = MakeRunner(); !made.ok()) {
    if (!route_source) return made;
    // No plans on the device (no room, a kernel it lacks): with a CPU route configured, the
    // model serves on the CPU alone, compiled for it (docs/routing.md).
    LogWarning("model '" + config_.name + "': its plans could not be prepared on the " + options_.backend->name() +
               " backend (" + made.ToString() +
               "): it serves on the CPU alone (routing.cpu: " + CpuRoutingName(config_.routing.cpu) + ")");
    runner_.reset();
    options_.backend = &CpuBackend();
    options_.replicas.clear();
    auto [source_graph, source_config] = std::move(*route_source);
    route_source.reset();
    RANKD_RETURN_IF_ERROR(Compile(std::move(source_graph), std::move(source_config)));
    RANKD_RETURN_IF_ERROR(MakeRunner());
  }
  const CompiledModel& c = *compiled_;
  if (c.hoisted()) {
    std::string why = CheckHoisting();
    if (!why.empty()) {  // a rule proved something false: run the graph as written
      runner_.reset();
      RANKD_RETURN_IF_ERROR(compiled_->Unhoist(why));
      RANKD_RETURN_IF_ERROR(MakeRunner());
    }
  }
  static_cast<CompileReport&>(report_) = c.report();
  for (const InputConfig& in : config_.inputs) {
    input_signature_.push_back({in.name, in.dtype, in.dims.ToVector(), in.scope == InputScope::kUser, in.ragged,
                                in.ragged ? in.max_length : 0, in.strings.bytes});
  }
  const Graph& g = c.graph();
  auto warm = Infer(ExampleRequest(2));
  if (!warm.ok()) return warm.status().WithContext("warm-up failed");
  for (const OutputConfig& out : config_.outputs) {
    OutputSignature o{out.name, DType::kInvalid, {}};
    for (int id : g.outputs) {
      const Value& v = g.values[static_cast<size_t>(id)];
      if (v.name != out.name) continue;
      o.dtype = v.dtype;
      // Per-row dims the graph declares; where it does not, as many -1 as the warm-up's output has.
      if (v.rank_known && !v.shape.empty()) o.dims.assign(v.shape.begin() + 1, v.shape.end());
    }
    for (const InferOutput& w : *warm) {
      if (w.name == out.name && o.dims.size() + 1 != static_cast<size_t>(w.data.rank())) {
        o.dims.assign(static_cast<size_t>(std::max<int64_t>(w.data.rank() - 1, 0)), -1);
      }
    }
    output_signature_.push_back(o);
  }
  RANKD_RETURN_IF_ERROR(StartBuckets().WithContext("shape buckets"));
  RANKD_RETURN_IF_ERROR(StartRowSplit().WithContext("cpu_row_split"));
  if (route_source) {
    RANKD_RETURN_IF_ERROR(
        StartRouting(std::move(route_source->first), route_source->second).WithContext("CPU routing"));
  }
  if (config_.batching.enabled) {
    Status batching = StartBatching().WithContext("batching");
    if (!batching.ok() && (config_.batching.configured || options_.batching == 1)) return batching;
    if (!batching.ok()) {  // batching was only the default: serve the model without it
      LogInfo("model '" + config_.name + "' is served without batching: " + batching.message());
      config_.batching.enabled = false;
    }
  }
  if (cpu_route_) cpu_route_->StartCounting();
  return Status::Ok();
}

double Model::AgreementTolerance() const { return config_.precision == "fp32" ? 1e-3 : 3e-2; }

StatusOr<std::shared_ptr<const Plan>> Model::PlanFor(const std::vector<TensorMeta>& graph_inputs,
                                                     const std::vector<int64_t>& ragged_max_lengths) const {
  const DiskTables* disk = runner_ ? runner_->disk_tables() : nullptr;
  if (!disk) return compiled_->PlanFor(graph_inputs, ragged_max_lengths);
  std::vector<TensorMeta> metas = graph_inputs;  // and the rows of the tables on disk (DiskTables)
  disk->AppendMetas(metas);
  return compiled_->PlanFor(metas, ragged_max_lengths);
}

std::string Model::CheckHoisting() const {
  // One user scored with its rows once, and with its rows repeated to every candidate: the second
  // is what the graph as written computes (the gathers pick row i for candidate i).
  constexpr int64_t kCandidates = 5;
  InferRequest once = ExampleRequest(kCandidates, 3);
  RandomizeFloats(once, 4242);
  InferRequest repeated = once;
  for (size_t c = 0; c < config().inputs.size(); ++c) {
    if (config().inputs[c].scope != InputScope::kUser) continue;
    InferInput& in = repeated.inputs[c];
    if (in.is_bytes()) {  // one row's strings, repeated
      PackedStrings rows;
      rows.shape = in.strings.shape;
      rows.shape[0] = kCandidates * (in.lengths.empty() ? 1 : in.strings.shape[0]);
      for (int64_t r = 0; r < kCandidates; ++r) {
        for (int64_t i = 0; i < in.strings.size(); ++i) rows.Append(in.strings.at(i));
      }
      in.strings = std::move(rows);
    } else {
      in.data = RepeatRows(in.data, kCandidates);
    }
    if (!in.lengths.empty()) in.lengths.assign(static_cast<size_t>(kCandidates), in.lengths[0]);
  }
  PreparedRequest a, b;
  Status s = BuildGraphInputs(once, a);
  if (s.ok()) s = BuildGraphInputs(repeated, b);
  if (!s.ok()) return "the check request is refused: " + s.ToString();
  auto per_user = RunPlanned(a);
  if (!per_user.ok()) return "a hoisted request fails: " + per_user.status().ToString();
  auto per_candidate = RunPlanned(b);
  if (!per_candidate.ok()) return "a hoisted request fails: " + per_candidate.status().ToString();
  for (size_t o = 0; o < per_user->size(); ++o) {
    if (!OutputsAgree((*per_user)[o], (*per_candidate)[o], AgreementTolerance())) {
      return "output '" + compiled_->output_names()[o] + "' changes when the user side runs once per user";
    }
  }
  return std::string();
}

Status Model::CheckServable() const {
  RANKD_RETURN_IF_ERROR(DeviceServable());
  for (const auto& file : graph().mapped_files) RANKD_RETURN_IF_ERROR(file->Check());
  return Status::Ok();
}

StatusOr<std::vector<InferOutput>> Model::Infer(const InferRequest& request, InferStats* stats) const {
  return Infer(request, {}, stats);
}

StatusOr<std::vector<InferOutput>> Model::Infer(const InferRequest& request, std::span<const LengthSums> length_sums,
                                                InferStats* stats) const {
  PhaseTimer whole("(a request, end to end)");  // made first, so it ends after the request's tensors are freed
  auto prepared = std::make_unique<PreparedRequest>();
  RANKD_RETURN_IF_ERROR(Admit(request, length_sums, *prepared));
  if (!batcher_) {
    SetDeadline(request, *prepared);
    return SelectOutputs(request, RunRouted(*prepared));
  }
  // Queued like an asynchronous request, waited for here (the caller keeps the request alive).
  std::promise<StatusOr<std::vector<InferOutput>>> promise;
  auto answer = promise.get_future();
  Enqueue(
      request, std::move(prepared), nullptr,
      [&promise, stats](StatusOr<std::vector<InferOutput>> outputs, const InferStats& how) {
        if (stats) *stats = how;
        promise.set_value(std::move(outputs));
      },
      /*run_here_when_idle=*/true);
  return answer.get();
}

void Model::InferAsync(std::shared_ptr<const ParsedRequest> request, InferDone done, bool run_here_when_idle) const {
  PhaseTimer whole("(a request, end to end)");
  auto prepared = std::make_unique<PreparedRequest>();
  if (Status s = Admit(request->request, request->length_sums, *prepared); !s.ok()) return done(s, InferStats{});
  if (!batcher_) {
    SetDeadline(request->request, *prepared);
    done(SelectOutputs(request->request, RunRouted(*prepared)), InferStats{});
    return;
  }
  const InferRequest& r = request->request;
  Enqueue(r, std::move(prepared), std::move(request), std::move(done), run_here_when_idle);
}

StatusOr<std::vector<InferOutput>> Model::SelectOutputs(const InferRequest& request,
                                                        StatusOr<std::vector<Tensor>> result) const {
  if (!result.ok()) return result.status();
  RANKD_RETURN_IF_ERROR(CheckServable());  // scores read from a table changed on disk are not returned
  std::vector<InferOutput> outputs;
  const std::vector<std::string>& names = compiled_->output_names();
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& out_name = names[i];
    bool wanted = request.outputs.empty()
                      ? std::any_of(config_.outputs.begin(), config_.outputs.end(),
                                    [&](const OutputConfig& o) { return o.name == out_name; })
                      : std::find(request.outputs.begin(), request.outputs.end(), out_name) != request.outputs.end();
    if (wanted) outputs.push_back({out_name, std::move((*result)[i])});
  }
  return outputs;
}

std::vector<std::pair<std::string, int64_t>> Model::UnknownKeys() const {
  const std::vector<int64_t> counts = runner_->ReadCounters();
  std::vector<std::pair<std::string, int64_t>> tables(counts.size());
  for (const Node& n : graph().nodes) {
    if (n.op != "KeyedRows") continue;
    for (const keyed_rows::Part& part : keyed_rows::Parts(n)) {
      const auto c = static_cast<size_t>(part.counter);
      if (c >= counts.size()) continue;
      const int64_t before = c < counters_at_load_.size() ? counters_at_load_[c] : 0;
      tables[c] = {part.table, counts[c] < 0 ? counts[c] : counts[c] - before};
    }
  }
  return tables;
}

}  // namespace rankd
