// Helpers shared by the tests.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/graph.h"
#include "rankd/request.h"
#include "rankd/tensor.h"

namespace rankd {
class Model;
}

namespace rankd::testing {

std::string SourcePath(const std::string& relative);
// ‖a − b‖ / ‖b‖ over all elements (both converted to double); INFINITY when shapes differ.
double RelativeError(const Tensor& a, const Tensor& b);
// A Tensor from values (FP32 or INT64 by T).
Tensor MakeF32(Shape shape, std::vector<float> values);
Tensor MakeI64(Shape shape, std::vector<int64_t> values);
// Serialized ONNX model with one node; inputs and outputs are FP32 of unknown shape unless given.
std::string OneNodeModel(const std::string& op, const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, int64_t opset = 17,
                         const std::vector<onnx::AttributeProto>& attrs = {});
// Writes bytes to a fresh file under a temporary directory and returns its path.
std::string WriteTempFile(const std::string& name, const std::string& bytes);
// Scores every reference request of zoo model `name` (tests/data/zoo) with `model` and expects
// PyTorch's outputs within `tolerance`, relative in norm and per element; at least 10 requests.
void ExpectZooScores(const Model& model, const std::string& name, double tolerance);
// The zoo model `name` rewritten with its tables' bytes in an external-data file beside it (as large
// models arrive): they are memory-mapped at load. Returns the new model file.
std::string WithExternalTables(const std::string& name);
// The zoo model `name`'s example requests (tests/data/zoo/NAME.requests.jsonl).
std::vector<InferRequest> ZooRequests(const std::string& name);
// A W1 (dlrm_dcnv2 zoo) request of 700 rows, 18,900 bags (the concatenation's large launch, a lane
// group per bag): random dense values, each feature's bag empty or of one id drawn uniformly from
// [0, id_rows), from `seed`.
InferRequest LargeW1Request(int64_t id_rows, uint64_t seed);
// Expects outputs as many as `want`, each equal to its counterpart in every element; `what` names the case.
void ExpectIdenticalOutputs(const std::vector<InferOutput>& got, const std::vector<InferOutput>& want,
                            const std::string& what);
// Each of `requests` scored on `model` in turn (a request that fails adds a test failure and an
// empty answer).
std::vector<std::vector<InferOutput>> ScoreEach(const Model& model, const std::vector<InferRequest>& requests);
// `threads` threads scoring `requests` on `model` at once, `each` requests apiece in turn: how many
// failed and how many outputs differed from `want` (one per request) in any element.
struct ScoredAtOnce {
  int failed = 0, wrong = 0;
};
ScoredAtOnce ScoreAtOnce(const Model& model, const std::vector<InferRequest>& requests,
                         const std::vector<std::vector<InferOutput>>& want, int threads, int each);
// Expects as many outputs as `want`, each of its shape and within `tolerance` of it (relative, in
// norm); `what` names the case in failures.
void ExpectOutputsNear(const std::vector<Tensor>& got, const std::vector<Tensor>& want, double tolerance,
                       const std::string& what);
// Writes, under `name`, a model whose rows depend on each other (a softmax over the batch
// dimension, input "x", output "y") and returns its path: it may be neither batched nor padded.
std::string WriteRowMixingModel(const std::string& name);

}  // namespace rankd::testing

namespace rankd::testing {

// Builds Graph IR directly, for pass and plan tests.
class GraphBuilder {
 public:
  int Input(const std::string& name, DType dtype, Shape shape);
  int Const(const std::string& name, Tensor t);
  // Adds a node with one output and returns the output's value id.
  int Op(const std::string& op, std::vector<int> inputs, std::map<std::string, AttributeValue> attrs = {});
  void Output(int value) { graph_.outputs.push_back(value); }
  Graph& graph() { return graph_; }

 private:
  Graph graph_;
  int counter_ = 0;
};

// An FP32 tensor of `shape`, uniform in [lo, hi).
Tensor RandomF32(Shape shape, std::mt19937_64& rng, float lo = -1, float hi = 1);
// An embedding table [rows, dim] of `dtype` (FP32, FP16 or BF16), values uniform in [-1, 1).
Tensor RandomTable(DType dtype, int64_t rows, int64_t dim, std::mt19937_64& rng);
// How many nodes of `graph` are `op`.
int CountOps(const Graph& graph, const std::string& op);
// A DCN cross network over an input "in" of [rows, features]: x0 = in · w0ᵀ (width columns), then
// `layers` of x = x0 * (up · (down · x) + bias) + x (low rank `rank`, the MulAdds unfused), then a
// one-column score. Weights from `rng`.
Graph CrossNetwork(int64_t rows, int64_t features, int64_t width, int64_t rank, int layers, std::mt19937_64& rng);

// Runs a graph on a backend (plan + executor), the CPU by default.
StatusOr<std::vector<Tensor>> RunGraph(const Graph& graph, const std::vector<Tensor>& inputs,
                                       const std::vector<int64_t>& ragged_max_lengths = {},
                                       const Backend& backend = CpuBackend(), Precision precision = Precision::kFp32);
// Runs `want` on the CPU in fp32 and `got` on `backend` at `precision`, on the same inputs, and
// expects `got`'s outputs within `tolerance` of `want`'s (ExpectOutputsNear); `what` names the case.
void ExpectSameOutputs(const Graph& got, const Graph& want, const std::vector<Tensor>& inputs, double tolerance,
                       const std::string& what, const Backend& backend = CpuBackend(),
                       Precision precision = Precision::kFp32);
// The CUDA backend, or nullptr when this build or machine has none (tests then skip).
const Backend* CudaOrNull();
// Whether the CUDA device is an sm_90 one (H100, H200), where Hopper-only kernels run.
bool CudaIsHopper();
// The CUDA devices this process sees; 0 when the build or the machine has none.
int GpuCount();

// The CPU backend under another identity whose health a test sets: a stand-in for one GPU of
// several meeting an unrecoverable error (replicas on the host).
class SwitchableHealthBackend : public Backend {
 public:
  const char* name() const override { return CpuBackend().name(); }
  const Kernel* FindKernel(const std::string& op) const override { return CpuBackend().FindKernel(op); }
  StatusOr<std::shared_ptr<ModelResources>> PrepareModel(const Graph& graph,
                                                         const PrepareOptions& options) const override;
  DeviceKind device_kind() const override { return DeviceKind::kHost; }
  Status Health() const override;
  // From now on Health answers Unavailable(`why`).
  void Fail(std::string why);
  // From now on PrepareModel answers ResourceExhausted(`why`) (a model that does not fit).
  void FailPrepare(std::string why);

 private:
  mutable std::mutex mu_;
  std::string failed_, prepare_fails_;
};

}  // namespace rankd::testing
