// Model: one loaded model version, ready to score requests.
//
// Loading reads the config and the ONNX graph, runs the load-time passes (constant folding, dead
// node removal, embedding-bag recognition, ragged inputs), checks every op against the backend,
// and warms up by scoring a small synthetic request, so a model that loads is a model that runs.
// Infer is thread-safe: plans are cached per input shape and executors are pooled.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "rankd/status.h"
#include "rankd/request.h"
#include "rankd/signature.h"
#include "rankd/tensor.h"
#include "backend/backend.h"
#include "compile/plan.h"
#include "model/config.h"
#include "model/graph.h"

namespace rankd {

struct ModelOptions {
  // Largest number of candidate rows one request may carry when the config sets no
  // max_batch_size.
  int64_t max_rows = 65536;
  // Plans kept per model (one per distinct input shape); the oldest is dropped past this.
  size_t max_plans = 128;
  // Where the model runs (FindBackend); nullptr means the CPU.
  const Backend* backend = nullptr;
  // Executors per model, each running one request at a time; 0 picks the backend's default
  // (unbounded on the CPU, whose executors are only workspaces; 4 on a GPU).
  int executors = 0;
  // Overrides the config's precision when set (fp32 | tf32 | bf16).
  std::string precision;
};

// What loading did, for `rankd inspect`.
struct LoadReport {
  int folded_nodes = 0;
  int removed_nodes = 0;
  int fused_embedding_bags = 0;
  int fused_activations = 0;
  int ragged_inputs = 0;
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

  // Scores one request. Bad input gives InvalidArgument naming the input and the problem.
  StatusOr<std::vector<InferOutput>> Infer(const InferRequest& request) const;
  // The plan a request with these graph inputs would use (for inspection and benchmarks).
  StatusOr<std::shared_ptr<const Plan>> PlanFor(const std::vector<TensorMeta>& graph_inputs,
                                                const std::vector<int64_t>& ragged_max_lengths) const;
  // The plan a request would run (validating it like Infer).
  StatusOr<std::shared_ptr<const Plan>> PlanForRequest(const InferRequest& request) const;
  // A small valid request (rows candidates, ragged lengths 1, ids 0), used for warm-up.
  InferRequest ExampleRequest(int64_t rows) const;

 private:
  Model() = default;
  Status Prepare();
  // Validates the request and builds the graph's inputs.
  Status BuildGraphInputs(const InferRequest& request, std::vector<Tensor>& inputs,
                          std::vector<int64_t>& ragged_max_lengths) const;

  // How each graph input is fed: from config input `config_index`, as dense data, ragged values
  // or ragged offsets.
  enum class Part { kDense, kValues, kOffsets };
  struct Binding {
    size_t config_index;
    Part part;
    int ragged_index;
  };

  ModelConfig config_;
  Graph graph_;
  int64_t version_ = 1;
  ModelOptions options_;
  LoadReport report_;
  std::vector<Binding> bindings_;  // one per graph input
  std::vector<std::string> ragged_names_;
  std::vector<InputSignature> input_signature_;
  std::vector<OutputSignature> output_signature_;

  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const Plan>> plans_;  // GUARDED_BY(mu_)
  mutable std::vector<std::string> plan_order_;                                  // GUARDED_BY(mu_)
  const Backend* backend_ = nullptr;
  std::shared_ptr<ModelResources> resources_;  // the backend's per-model state (device weights)
  int max_executors_ = 0;                      // 0 = unbounded

  // An executor from the pool (waiting while all are busy), and back.
  StatusOr<std::unique_ptr<Executor>> AcquireExecutor() const;
  void ReleaseExecutor(std::unique_ptr<Executor> executor) const;
  mutable std::condition_variable executor_freed_;
  mutable int executors_created_ = 0;                                              // GUARDED_BY(mu_)
  mutable std::vector<std::unique_ptr<Executor>> idle_executors_;                // GUARDED_BY(mu_)
};

// A version as clients write it ("3"); the empty string means "the server's choice" (-1).
StatusOr<int64_t> ParseModelVersion(const std::string& text);

// Version directories of a model: the numeric subdirectories holding model.onnx, ascending.
std::vector<int64_t> ListModelVersions(const std::string& model_dir);

}  // namespace rankd
