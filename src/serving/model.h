// Model: one loaded model version, ready to score requests.
//
// Loading reads the config and the ONNX graph, runs the load-time passes (constant folding, dead
// node removal, embedding-bag recognition, ragged inputs), checks every op against the backend,
// and warms up by scoring a small synthetic request, so a model that loads is a model that runs.
// Infer is thread-safe: plans are cached per input shape and executors are pooled. With batching
// on (the config's `batching` section), concurrent requests queue in a Batcher and run merged
// (docs/batching.md); the cost model is measured at warm-up unless the config sets it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"
#include "batching/batch_merge.h"
#include "batching/batcher.h"
#include "batching/merge_gate.h"
#include "compile/plan.h"
#include "model/config.h"
#include "model/graph.h"
#include "rankd/request.h"
#include "rankd/signature.h"
#include "rankd/status.h"
#include "rankd/tensor.h"
#include "runtime/capture_worker.h"
#include "runtime/executor.h"
#include "runtime/executor_pool.h"
#include "serving/shape_buckets.h"

namespace rankd {

struct ModelOptions {
  // Largest number of candidate rows one request may carry when the config sets no
  // max_batch_size.
  int64_t max_rows = 65536;
  // Plans kept per model (one per distinct input shape); the oldest is dropped past this.
  size_t max_plans = 512;
  // Where the model runs (FindBackend); nullptr means the CPU.
  const Backend* backend = nullptr;
  // Executors per model, each running one request at a time; 0 picks the backend's default
  // (unbounded on the CPU, whose executors are only workspaces; 4 on a GPU).
  int executors = 0;
  // Overrides the config's precision when set (fp32 | tf32 | bf16 | bf16-activations).
  std::string precision;
  // Overrides the config's tables.dtype when set (FP32 | BF16 | FP16).
  std::string table_dtype;
  // Overrides the config's buckets.enabled when 0 (off) or 1 (on); -1 keeps it.
  int shape_buckets = -1;
  // The fusion passes (embedding bags, GEMM epilogues); off only to measure what they save.
  bool fusion = true;
  // Overrides the config's user_hoisting when 0 (off) or 1 (on); -1 keeps it.
  int user_hoisting = -1;
  // INT64 ids that every table they index fits in 32 bits are held in 32 bits from parsing on
  // (TakesIdsIn32Bits); off only to measure what that saves.
  bool ids_in_32_bits = true;
};

// What loading did, for `rankd inspect`.
struct LoadReport {
  int lowered_splits = 0;  // LowerSplits
  int lowered_gelus = 0;   // LowerGelus
  int folded_nodes = 0;
  int removed_nodes = 0;
  int fused_embedding_bags = 0;
  int fused_layer_norms = 0;  // FuseDecomposedLayerNorms
  int fused_epilogues = 0;
  int split_products = 0;           // SplitConcatProducts
  int unexpanded_broadcasts = 0;    // ReadBroadcastsUnexpanded
  int fused_mul_adds = 0;           // FuseMulAdd
  int fused_product_mul_adds = 0;   // FuseProductMulAdds
  int fused_elementwise = 0;        // FuseElementwiseChains
  int fused_attention = 0;          // FuseTargetAttention
  int fused_softmax_attention = 0;  // FuseSoftmaxAttention
  int fused_dot_interactions = 0;   // FuseDotInteractions
  int fused_embedding_concats = 0;  // FuseEmbeddingConcats
  int merged_tables = 0;            // MergeTablesSharingIds
  int narrowed_tables = 0;          // StoreTablesAs
  int ragged_inputs = 0;
  std::string buckets = "off";                       // "on", "off" or why they are off
  std::string hoisting = "off";                      // user-side hoisting: what runs once per user, or why nothing does
  std::vector<std::string> hoisting_gathers;         // the per-user values gathered to the candidates
  int hoisted_nodes = 0, hoisted_compute_nodes = 0;  // nodes run once per user, and those computing
  int warmup_captures = 0;                           // plans captured (per executor) before the model reported ready
  int64_t warmup_capture_bytes = 0;
  double warmup_capture_ms = 0;
};

// How a request ran, for metrics.
struct InferStats {
  uint64_t queue_us = 0;   // waiting in the batcher's queue
  int batch_requests = 1;  // requests in the batch it ran in
  bool execution = true;   // this request counts its batch's execution (one per batch)
};

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
  const Graph& graph() const { return graph_; }
  const LoadReport& load_report() const { return report_; }
  const Backend& backend() const { return *backend_; }
  // The signature frontends describe (metadata) and Engine exposes; computed once at load.
  const std::vector<InputSignature>& inputs() const { return input_signature_; }
  const std::vector<OutputSignature>& outputs() const { return output_signature_; }
  // Whether a parser may hold input `name`'s INT64 values as INT32 (InferInput::ids_in_32_bits):
  // the ids of bags over tables of at most INT32_MAX rows alone (compile/narrowable_ids.h), unless
  // RANKD_IDS_IN_32_BITS=0. Set at load.
  bool TakesIdsIn32Bits(std::string_view name) const;

  // Scores one request. Bad input gives InvalidArgument naming the input and the problem; with
  // batching, a full queue gives Unavailable and a passed deadline DeadlineExceeded.
  StatusOr<std::vector<InferOutput>> Infer(const InferRequest& request, InferStats* stats = nullptr) const;
  // OK while the external-data files the model reads are as they were loaded (MappedFile::Check).
  Status CheckFiles() const;
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
  // The batcher's policy (cost coefficients as measured or configured); nullptr without batching.
  const BatchPolicyOptions* batch_policy() const { return batcher_ ? &batch_policy_ : nullptr; }
  // The plan a request with these graph inputs would use (for inspection and benchmarks).
  StatusOr<std::shared_ptr<const Plan>> PlanFor(const std::vector<TensorMeta>& graph_inputs,
                                                const std::vector<int64_t>& ragged_max_lengths) const;
  // The plan a request would run (validating it like Infer).
  StatusOr<std::shared_ptr<const Plan>> PlanForRequest(const InferRequest& request) const;
  // Kernels, copies and memsets one run of `plan` puts on the device (Executor::CountLaunches).
  StatusOr<Executor::Launches> CountLaunches(const Plan& plan) const;
  // A small valid request (rows candidates, ragged rows of `ragged_length` ids 0, dense zeros),
  // used for warm-up and cost measurement.
  InferRequest ExampleRequest(int64_t rows, int64_t ragged_length = 1) const;
  // How far outputs may move when rows are merged or padded: 1e-3 in fp32, 3e-2 with tf32/bf16.
  double AgreementTolerance() const;

 private:
  Model() = default;
  Status Prepare();
  // bindings_ for graph_.inputs (model_hoisting.cc).
  void BindGraphInputs();
  // A plan of graph_ at small probe shapes, whose value shapes the passes read (model_hoisting.cc).
  struct ShapeProbe {
    static constexpr int64_t kRows = 7;  // candidates; user rows are repeated to as many
    std::shared_ptr<const Plan> plan;
    std::vector<int> user_rows;                    // graph inputs of user rows
    std::vector<std::pair<int, int>> user_ragged;  // (values, offsets) of user ragged inputs
  };
  StatusOr<ShapeProbe> ProbeShapes() const;
  // Runs SplitConcatProducts, ReadBroadcastsUnexpanded and FuseMulAdd (with the fusion passes on).
  Status SplitProducts();
  // Runs FuseTargetAttention, FuseSoftmaxAttention and FuseElementwiseChains on graph_ (with the fusion passes on),
  // after hoisting: the attention reads per-user values with the request index, and an element-wise group never mixes
  // user-side and candidate-side ops. `precision` decides whether the backend takes FuseProductMulAdds.
  Status FuseAfterHoisting(Precision precision);
  // Runs the hoisting pass when the config allows it and the model has user and candidate inputs.
  Status StartHoisting();
  // report_.hoisting for a hoisted graph, from the report's counts and gathers.
  void DescribeHoisting();
  // "" when the hoisted graph scores a request as the graph as written does, else why not.
  std::string CheckHoisting() const;
  // ids_in_32_bits_, from a plan at probe shapes (model_inputs.cc).
  void FindIdsIn32Bits();
  // Validates the request and builds the graph's inputs.
  Status BuildGraphInputs(const InferRequest& request, PreparedRequest& prepared) const;
  // Runs prepared graph inputs on an executor from the pool, padded to their shape bucket when
  // buckets are on (model_buckets.cc).
  StatusOr<std::vector<Tensor>> RunPrepared(const PreparedRequest& prepared) const;
  // Runs graph inputs at their own shapes; with `capture`, queues a capture of the plan when it
  // ran uncaptured.
  StatusOr<std::vector<Tensor>> RunPlanned(const PreparedRequest& prepared, bool capture = true) const;
  // Runs `plan` on `inputs` on `executor` and gives the executor back to the pool; with
  // `capture`, counts a graph hit or miss and queues a capture of the plan on a miss.
  StatusOr<std::vector<Tensor>> RunOn(const std::shared_ptr<const Plan>& plan, std::unique_ptr<Executor> executor,
                                      std::span<const Tensor> inputs, bool capture) const;
  // The bucket of prepared graph inputs (its ragged rows scanned for rows without ids when the
  // buckets keep such inputs at their own length), or nullopt past the largest.
  std::optional<BucketKey> FindBucket(const PreparedRequest& prepared) const;
  // Decides whether buckets are on and checks padding changes nothing; then captures.
  Status StartBuckets();
  // Captures the warm-up buckets on every executor (ragged inputs' max lengths, in ragged order);
  // a capture that fails turns graphs off, not the model.
  Status CaptureWarmupBuckets(const std::vector<int64_t>& max_lengths);
  // Captures `plan` on every executor that lacks it, each taken from the pool when idle.
  void CaptureEverywhere(const std::shared_ptr<const Plan>& plan) const;
  // Whether a batch of several requests, `parts`, runs merged now (merge_gate.h): always, unless
  // graphs are captured and the merged batch's bucket (FindBucket's, found from the parts without
  // merging them) has none yet; may queue the bucket's capture.
  bool MergeNow(const std::vector<const PreparedRequest*>& parts) const;
  // Queues prepared graph inputs to the batcher and waits for their outputs (model_batching.cc).
  StatusOr<std::vector<Tensor>> RunQueued(const InferRequest& request, const PreparedRequest& prepared,
                                          InferStats* stats) const;
  // The batcher's callback: merges, runs, splits; a batch that fails runs its requests alone.
  void RunBatch(std::vector<std::unique_ptr<BatchTask>> batch) const;
  // Checks that merged requests score as they do alone, measures the cost model, starts the batcher.
  Status StartBatching();

  // How each graph input is fed: from config input `config_index`, as dense data, ragged values
  // or ragged offsets; or, in a hoisted graph, each candidate's user row (no config input).
  struct Binding {
    size_t config_index;
    GraphInputKind kind;
  };

  ModelConfig config_;
  Graph graph_;
  int64_t version_ = 1;
  ModelOptions options_;
  LoadReport report_;
  std::vector<Binding> bindings_;  // one per graph input
  bool hoisted_ = false;           // the graph runs its user side once per user (HoistUserSide)
  std::vector<std::string> ragged_names_;
  std::vector<InputSignature> input_signature_;
  std::vector<bool> ids_in_32_bits_;  // per config input: a parser may hold it in 32 bits
  std::vector<OutputSignature> output_signature_;

  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const Plan>> plans_;  // GUARDED_BY(mu_)
  mutable std::vector<std::string> plan_order_;                                 // GUARDED_BY(mu_)
  // Per bucket (BucketKey::Numbers): its graph input shapes, so that looking its plan up (per
  // request, and in MergeNow per merged batch) pads no example, and the plan last found for them,
  // so that a hit builds no plan key (6-7 µs a request of W1's 53 inputs on the H200's host) and
  // leaves plans_'s bound in force (the plan expires when plans_ drops it); GUARDED_BY(mu_).
  struct BucketPlan {
    std::vector<TensorMeta> metas;
    std::weak_ptr<const Plan> plan;
  };
  struct NumbersHash {
    size_t operator()(const std::vector<int64_t>& v) const;
  };
  mutable std::unordered_map<std::vector<int64_t>, BucketPlan, NumbersHash> bucket_plans_;
  const Backend* backend_ = nullptr;
  std::shared_ptr<ModelResources> resources_;  // the backend's per-model state (device weights)
  int max_executors_ = 0;                      // 0 = unbounded
  std::unique_ptr<ExecutorPool> executors_;    // made with resources_

  // An executor from the pool (waiting while all are busy), and back.
  StatusOr<std::unique_ptr<Executor>> AcquireExecutor() const { return executors_->Acquire(); }
  void ReleaseExecutor(std::unique_ptr<Executor> executor) const { executors_->Release(std::move(executor)); }
  mutable std::unordered_set<uint64_t> uncapturable_;  // plans whose capture failed; GUARDED_BY(mu_)

  std::unique_ptr<ShapeBuckets> buckets_;    // nullptr: requests run at their own shapes
  std::vector<GraphInputKind> input_kinds_;  // bindings_[i].kind, as MergeRequests and PadToBucket take them
  std::vector<BucketKey> warmup_keys_;
  bool capture_ = false;  // capture plans as graphs (buckets on, backend able)
  mutable std::atomic<uint64_t> graph_hits_{0}, graph_misses_{0}, captures_{0}, capture_failures_{0}, capture_us_{0};
  mutable std::atomic<uint64_t> real_rows_{0}, padded_rows_{0}, merges_deferred_{0};
  mutable MergeGate merge_gate_;                           // whether a batch runs merged, where graphs are captured
  mutable std::unique_ptr<CaptureWorker> capture_worker_;  // before batcher_: outlives its batches

  std::vector<std::string> output_names_;  // the graph's outputs, in order
  BatchPolicyOptions batch_policy_;
  std::unique_ptr<Batcher> batcher_;  // last: destroyed (drained) first
};

// Fills the float inputs of `request` with pseudo-random values in [0, 1) (load-time checks).
void RandomizeFloats(InferRequest& request, uint32_t seed);

// A version as clients write it ("3"); the empty string means "the server's choice" (-1).
StatusOr<int64_t> ParseModelVersion(const std::string& text);

// Version directories of a model: the numeric subdirectories holding model.onnx, ascending.
std::vector<int64_t> ListModelVersions(const std::string& model_dir);

}  // namespace rankd
