// Model: one loaded model version, ready to score requests.
//
// A thin lifecycle object over three parts: the compiled model (compile/compiled_model.h: the
// graph after the load-time passes, and its plans), the plan runner (runtime/plan_runner.h: the
// executors on the backend and their captures) and, with batching on, the batcher
// (batching/batcher.h). Loading composes them and checks what needs scores: that hoisting, padding
// to shape buckets and merging requests change nothing; then it warms up, so a model that loads
// is a model that runs. Infer is thread-safe. With batching on (the config's `batching` section),
// concurrent requests queue in a Batcher and run merged (docs/batching.md); the cost model is
// measured at warm-up unless the config sets it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "batching/batch_merge.h"
#include "batching/batcher.h"
#include "batching/merge_gate.h"
#include "common/mutex.h"
#include "common/parsed_request.h"
#include "compile/compiled_model.h"
#include "compile/plan.h"
#include "embedding/table_budget.h"
#include "model/config.h"
#include "model/graph.h"
#include "rankd/request.h"
#include "rankd/signature.h"
#include "rankd/status.h"
#include "rankd/tensor.h"
#include "runtime/executor.h"
#include "runtime/plan_runner.h"
#include "serving/cpu_route.h"
#include "serving/row_split.h"
#include "serving/shape_buckets.h"

namespace rankd {

// The compile options (the backend, where the model runs: FindBackend; precision, table dtype,
// fusion, hoisting, the plans kept), then what running and serving it take.
struct ModelOptions : CompileOptions {
  // Largest number of candidate rows one request may carry when the config sets no
  // max_batch_size.
  int64_t max_rows = 65536;
  // Executors per replica, each running one request at a time; 0 picks the backend's default
  // (unbounded on the CPU, whose executors are only workspaces; 4 on a GPU).
  int executors = 0;
  // The GPUs a model on a CUDA backend is replicated on when its config names none (the server's
  // --gpus); empty: `backend`'s GPU alone.
  GpuSet gpus;
  // When set, the backends of the model's replicas, whatever the config's gpus say (tests:
  // replicas on the host).
  std::vector<const Backend*> replicas;
  // Overrides the config's buckets.enabled when 0 (off) or 1 (on); -1 keeps it.
  int shape_buckets = -1;
  // Overrides the config's batching.enabled when 0 (off) or 1 (on); -1 keeps it.
  int batching = -1;
  // Overrides the config's tables.gpu_budget_mb when set (-1: no budget).
  std::optional<int64_t> table_gpu_budget_mb;
  // When set, every table read only by lookups is cached on the GPU with a cache of this share
  // of its rows (at least one), as tables.cache_rows would (benchmarks of cache sizes).
  std::optional<double> table_cache_fraction;
  // When set, every table read only by lookups that may go on disk does (embedding/disk_tables.h),
  // those the load holds in memory written to this folder, as tables.tiers and tables.disk_dir
  // would (benchmarks of the disk tier).
  std::optional<std::string> tables_on_disk;
  // Overrides the config's tables.disk_cache_mb when set.
  std::optional<int64_t> table_disk_cache_mb;
  // Overrides the config's tables.hotness_snapshot when set.
  std::optional<std::string> table_hotness_snapshot;
  // Overrides the config's tables.host_budget_mb when set.
  std::optional<int64_t> table_host_budget_mb;
  // Overrides the config's cpu_row_split when set.
  std::optional<CpuRowSplit> cpu_row_split;
  // Used instead of the model directory's config file when set (a load's config override:
  // ModelRepository::Load).
  std::optional<ModelConfig> config;
};

// What loading did, for `rankd inspect`: the passes, then the buckets and the warm-up captures.
struct LoadReport : CompileReport {
  std::string buckets = "off";    // "on", "off" or why they are off
  std::string row_split = "off";  // RowSplitSummary, or why the rows are not split
  int warmup_captures = 0;        // plans captured (per executor) before the model reported ready
  int64_t warmup_capture_bytes = 0;
  double warmup_capture_ms = 0;
};

// How a request ran, for metrics.
struct InferStats {
  uint64_t queue_us = 0;   // waiting in the batcher's queue
  int batch_requests = 1;  // requests in the batch it ran in
  bool execution = true;   // this request counts its batch's execution (one per batch)
  int64_t batch_rows = 0;  // rows of the execution it ran in (a merged batch's together; 0: its own)
};

// Called once with a request's outputs (or why it failed) and how it ran.
using InferDone = std::function<void(StatusOr<std::vector<InferOutput>> outputs, const InferStats& stats)>;

class Model {
 public:
  // Loads version `version` of the model in `model_dir` (REPO/NAME); -1 picks the highest.
  static StatusOr<std::unique_ptr<Model>> Load(const std::string& model_dir, int64_t version,
                                               const ModelOptions& options = {});
  // Loads an ONNX file with an explicit config (tests, tools).
  static StatusOr<std::unique_ptr<Model>> LoadFile(const std::string& onnx_path, ModelConfig config,
                                                   const ModelOptions& options = {});

  const std::string& name() const { return config_.name; }
  int64_t version() const { return version_; }
  const ModelConfig& config() const { return config_; }
  const Graph& graph() const { return compiled_->graph(); }
  const LoadReport& load_report() const { return report_; }
  const Backend& backend() const { return runner_->backend(); }
  // Rows one request may carry (the config's max_batch_size, else the server's limit), and the
  // executors that run its requests at once.
  int64_t max_request_rows() const { return config_.max_batch_size > 0 ? config_.max_batch_size : options_.max_rows; }
  // The largest max_length of the model's ragged inputs (1 without any): the cost probes' longest rows.
  int64_t longest_ragged_length() const;
  int executors() const { return runner_->max_executors(); }
  // Where the model's replicas run (its config's gpus), each with the runs it served.
  std::vector<ReplicaState> replicas() const { return runner_->replicas(); }
  // The embedding tables and where each is kept (embedding/table_budget.h); on a backend without
  // a device of its own every table is read where it lies, whatever its tier.
  const std::vector<TableInfo>& tables() const { return tables_; }
  // The keeper of the tables' GPU caches; null when no table is cached.
  CacheKeeper* cache_keeper() const { return runner_->cache_keeper(); }
  // The model's plans on the CPU beside its device's and the runs routed to them (routing.cpu,
  // docs/routing.md); null without routing, or when the model runs on the CPU.
  const CpuRoute* cpu_route() const { return cpu_route_.get(); }
  // The tables on disk (tables.tiers: disk); null when none is.
  const DiskTables* disk_tables() const { return runner_->disk_tables(); }
  // Per keyed table (tables.keyed), by name: the keys its lookups read that its files do not
  // hold (each read the default row), since the model loaded (its load-time runs not counted).
  std::vector<std::pair<std::string, int64_t>> UnknownKeys() const;
  // The signature frontends describe (metadata) and Engine exposes; computed once at load.
  const std::vector<InputSignature>& inputs() const { return input_signature_; }
  const std::vector<OutputSignature>& outputs() const { return output_signature_; }

  // Scores one request. Bad input gives InvalidArgument naming the input and the problem; with
  // batching, a full queue gives Unavailable and a passed deadline DeadlineExceeded.
  StatusOr<std::vector<InferOutput>> Infer(const InferRequest& request, InferStats* stats = nullptr) const;
  // The same for a request whose ragged inputs' lengths its parser summed (common/parsed_request.h;
  // per input of `request`, or empty).
  StatusOr<std::vector<InferOutput>> Infer(const InferRequest& request, std::span<const LengthSums> length_sums,
                                           InferStats* stats = nullptr) const;
  // Scores `request` without waiting for it: validates it and builds its graph inputs on this
  // thread, then queues it to the batcher and returns; `done` runs on the batcher's thread when it
  // has run. A request the model refuses, and every request of a model without batching, runs
  // `done` on this thread before InferAsync returns; so does one that finds the batcher idle when
  // `run_here_when_idle` (a frontend's thread, which would otherwise hand it to the batcher's and
  // wake it: batching then costs nothing under light load). The model keeps `request` until `done` has
  // returned, and stays alive until then even when its last owner lets it go first (destroying a
  // model drains its queue), so `done` may use it.
  void InferAsync(std::shared_ptr<const ParsedRequest> request, InferDone done, bool run_here_when_idle = false) const;
  // For a server that stops: refuses new requests and answers the queued ones with `why` at once
  // (Batcher::FailQueued); batches running finish. Nothing to do without batching (a request runs
  // on its caller's thread).
  void FailQueued(const Status& why) const;
  // OK while the model can serve: some replica's device is usable (Backend::Health; not after a
  // sticky CUDA error), or the model falls back to the CPU (routing.cpu), and the external-data files it reads are as
  // they were loaded (MappedFile::Check). Requests are refused, and readiness fails, while it is not.
  Status CheckServable() const;
  // Counters of buckets and captures so far.
  BucketCounters bucket_counters() const;
  // The shape buckets in use, or nullptr when requests run at their own shapes.
  const ShapeBuckets* shape_buckets() const { return buckets_.get(); }
  // The buckets captured at warm-up (empty without captures).
  const std::vector<BucketKey>& warmup_buckets() const { return warmup_keys_; }
  // The plan of a bucket (for inspection).
  StatusOr<std::shared_ptr<const Plan>> PlanForBucket(const BucketKey& key) const;
  // Waits until no background capture is queued or running (tests).
  void WaitForCaptures() const;
  // Whether the model takes a request now: UNAVAILABLE where its batcher would refuse one (a full
  // queue, a queue that stands with a late head), so that a frontend refuses it before reading it.
  Status Admission() const;
  // The batcher's policy (cost coefficients as measured or configured); nullptr without batching.
  const BatchPolicyOptions* batch_policy() const { return batcher_ ? &batch_policy_ : nullptr; }
  // The plan a request with these graph inputs would use (for inspection and benchmarks).
  StatusOr<std::shared_ptr<const Plan>> PlanFor(const std::vector<TensorMeta>& graph_inputs,
                                                const std::vector<int64_t>& ragged_max_lengths) const;
  // The plan a request would run (validating it like Infer).
  StatusOr<std::shared_ptr<const Plan>> PlanForRequest(const InferRequest& request) const;
  // The graph's inputs a request becomes (validating it like Infer), for inspection: they view
  // the request's tensors, so `request` must outlive them.
  StatusOr<PreparedRequest> PrepareForInspection(const InferRequest& request) const;
  // Kernels, copies and memsets one run of `plan` puts on the device (Executor::CountLaunches).
  StatusOr<Executor::Launches> CountLaunches(const Plan& plan) const;
  // A small valid request (rows candidates, ragged rows of `ragged_length` ids 0, dense zeros),
  // used for warm-up and cost measurement.
  InferRequest ExampleRequest(int64_t rows, int64_t ragged_length = 1) const;
  // How far outputs may move when rows are merged or padded: 1e-3 in fp32, 3e-2 with tf32/bf16.
  double AgreementTolerance() const;

 private:
  Model() = default;
  Status Prepare(Graph graph, ModelConfig config);
  // Compiles the graph for options_.backend and takes the compiled config (Prepare's first step).
  Status Compile(Graph graph, ModelConfig config);
  // Places the compiled graph's tables by the config's budget and prepares them and the weights on
  // the backend, with the executor pool.
  Status MakeRunner();
  // "" when the hoisted graph scores a request as the graph as written does, else why not.
  std::string CheckHoisting() const;
  // Validates the request and builds the graph's inputs (model_inputs.cc).
  Status BuildGraphInputs(const InferRequest& request, PreparedRequest& prepared,
                          std::span<const LengthSums> length_sums = {}) const;
  // Runs prepared graph inputs on an executor, padded to their shape bucket when buckets are on
  // (model_buckets.cc).
  StatusOr<std::vector<Tensor>> RunPrepared(const PreparedRequest& prepared) const;
  // Runs prepared graph inputs where routing sends them (model_routing.cc): RunPrepared on the
  // device, or on the CPU route; a run the device fails because it can no longer run work is run
  // again on the CPU. Without a CPU route, RunPrepared.
  StatusOr<std::vector<Tensor>> RunRouted(const PreparedRequest& prepared) const;
  // Makes the CPU route from the graph and config as loaded, checks that it scores as the device
  // does and, for routing by cost, fits both sides' costs (model_routing.cc).
  Status StartRouting(Graph graph, const ModelConfig& config);
  // The median time of five runs by `run` of an example request of `rows` rows and ragged rows of
  // `length` ids, after one run that builds its plan (cost measurement).
  using PreparedRun = std::function<StatusOr<std::vector<Tensor>>(const PreparedRequest&)>;
  StatusOr<CostSample> TimeRuns(int64_t rows, int64_t length, const PreparedRun& run) const;
  // Runs graph inputs at their own shapes, uncaptured.
  StatusOr<std::vector<Tensor>> RunPlanned(const PreparedRequest& prepared) const;
  // Decides where a run on the CPU splits its rows over the CPU's threads (model_row_split.cc):
  // checks that split runs score as whole ones do and, for cpu_row_split: auto, times both.
  Status StartRowSplit();
  // Runs graph inputs as `parts` parts of their rows at once, each on an executor of its own
  // with one thread, into outputs of all the rows.
  StatusOr<std::vector<Tensor>> RunRowSplit(const PreparedRequest& prepared, int parts) const;
  // The bucket of prepared graph inputs (its ragged rows scanned for rows without ids when the
  // buckets keep such inputs at their own length), or nullopt past the largest.
  std::optional<BucketKey> FindBucket(const PreparedRequest& prepared) const;
  // Decides whether buckets are on and checks padding changes nothing; then captures.
  Status StartBuckets();
  // Captures the warm-up buckets on every executor (ragged inputs' max lengths, in ragged order);
  // a capture that fails turns graphs off, not the model.
  Status CaptureWarmupBuckets(const std::vector<int64_t>& max_lengths);
  // Whether a batch of several requests, `parts`, runs merged now (merge_gate.h): always, unless
  // graphs are captured and the merged batch's bucket (FindBucket's, found from the parts without
  // merging them) has none yet; may queue the bucket's capture.
  bool MergeNow(const std::vector<const PreparedRequest*>& parts) const;
  // Whether merged batches leave their ragged values to the device to gather (MergeRequests'
  // `defer`): on a GPU with shape buckets, where nothing on the host reads a run's ids (no table
  // caches' keeper, no tables on disk, no CPU route, no buckets that scan ids for empty rows).
  bool DefersMerges() const;
  // OK while some replica's device is healthy, or the CPU takes the model's runs (cpu_route.h).
  Status DeviceServable() const { return cpu_route_ ? Status::Ok() : runner_->Health(); }
  // Checks the outputs a request asks for and builds its graph inputs (model_inputs.cc).
  Status Admit(const InferRequest& request, std::span<const LengthSums> length_sums, PreparedRequest& prepared) const;
  // The outputs a request asked for, from its run's graph outputs; fails when a table the model
  // reads changed on disk meanwhile.
  StatusOr<std::vector<InferOutput>> SelectOutputs(const InferRequest& request,
                                                   StatusOr<std::vector<Tensor>> result) const;
  // Queues an admitted request to the batcher; `done` runs once, here when the queue refuses it
  // (model_batching.cc). `keep` owns what `request` and `length_sums` point into.
  void Enqueue(const InferRequest& request, std::unique_ptr<PreparedRequest> prepared, std::shared_ptr<const void> keep,
               InferDone done, bool run_here_when_idle) const;
  // The batcher's callback: merges, runs, splits; a batch that fails runs its requests alone.
  void RunBatch(std::vector<std::unique_ptr<BatchTask>> batch) const;
  // Checks that merged requests score as they do alone, measures the cost model, starts the batcher.
  Status StartBatching();

  ModelConfig config_;  // the compiled model's, with the options' overrides of buckets
  int64_t version_ = 1;
  ModelOptions options_;
  LoadReport report_;
  std::unique_ptr<CompiledModel> compiled_;
  mutable MergeGate merge_gate_;  // whether a batch runs merged, where graphs are captured; outlives runner_'s captures
  std::vector<int64_t> counters_at_load_;  // runner_->ReadCounters() when the load was done
  std::unique_ptr<PlanRunner> runner_;     // its capture worker, stopped first, tells merge_gate_ of captures
  std::vector<InputSignature> input_signature_;
  std::vector<OutputSignature> output_signature_;
  std::vector<TableInfo> tables_;

  // Per bucket (BucketKey::Numbers): its graph input shapes, so that looking its plan up (per
  // request, and in MergeNow per merged batch) pads no example, and the plan last found for them,
  // so that a hit builds no plan key (6-7 µs a request of W1's 53 inputs on the H200's host) and
  // leaves the compiled model's bound on plans in force (the plan expires when it drops it).
  struct BucketPlan {
    std::vector<TensorMeta> metas;
    std::weak_ptr<const Plan> plan;
  };
  struct NumbersHash {
    size_t operator()(const std::vector<int64_t>& v) const;
  };
  mutable Mutex mu_;
  mutable std::unordered_map<std::vector<int64_t>, BucketPlan, NumbersHash> bucket_plans_ RANKD_GUARDED_BY(mu_);

  std::unique_ptr<ShapeBuckets> buckets_;  // nullptr: requests run at their own shapes
  RowSplitPolicy row_split_;               // off until StartRowSplit
  std::vector<BucketKey> warmup_keys_;
  mutable std::atomic<uint64_t> real_rows_{0}, padded_rows_{0}, merges_deferred_{0};

  BatchPolicyOptions batch_policy_;
  std::unique_ptr<CpuRoute> cpu_route_;  // null without routing
  std::unique_ptr<Batcher> batcher_;     // last: destroyed (drained) first
};

// Fills the float inputs of `request` with pseudo-random values in [0, 1) (load-time checks).
void RandomizeFloats(InferRequest& request, uint32_t seed);

// A version as clients write it ("3"); the empty string means "the server's choice" (-1).
StatusOr<int64_t> ParseModelVersion(const std::string& text);

// Version directories of a model: the numeric subdirectories holding model.onnx, ascending.
std::vector<int64_t> ListModelVersions(const std::string& model_dir);

}  // namespace rankd
