// CompiledModel: a model's graph after the load-time passes, how requests feed it, and its plans.
//
// Compiling resolves the config against the graph, lowers and folds, recognises embedding bags
// and layer norms, rewrites ragged inputs into (values, offsets) pairs, stores tables as the
// config asks, splits products, hoists the user side (when the config allows it and the model has
// user and candidate inputs) and fuses what the backend runs fused. Plans, one per set of input
// shapes, are built on demand and cached. Nothing here runs the graph: checks that need scores
// (that hoisting changes nothing, say) are made by the caller, which may then Unhoist.
//
// Thread safety: after Compile (and Unhoist, a load-time step), every method is const and
// thread-safe; PlanFor may be called from many threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "common/mutex.h"
#include "common/prepared_request.h"
#include "compile/plan.h"
#include "model/config.h"
#include "model/graph.h"
#include "rankd/status.h"

namespace rankd {

struct CompileOptions {
  // The backend the plans are for; it decides which fusions pay (FuseProductMulAdds).
  const Backend* backend = &CpuBackend();
  // Overrides the config's precision when set (fp32 | tf32 | bf16 | bf16-activations).
  std::string precision;
  // Overrides the config's tables.dtype when set (FP32 | BF16 | FP16).
  std::string table_dtype;
  // The fusion passes (embedding bags, GEMM epilogues); off only to measure what they save.
  bool fusion = true;
  // Overrides the config's user_hoisting when 0 (off) or 1 (on); -1 keeps it.
  int user_hoisting = -1;
  // Plans kept (one per distinct input shape); the oldest is dropped past this.
  size_t max_plans = 512;
};

// What the passes did, for `rankd inspect`.
struct CompileReport {
  int lowered_splits = 0;  // LowerSplits
  int lowered_gelus = 0;   // LowerGelus
  int folded_nodes = 0;
  int removed_nodes = 0;
  int fused_embedding_bags = 0;
  int fused_segment_bags = 0;  // FuseSegmentBags: TensorFlow's sparse segment sums (tf2onnx)
  int fused_layer_norms = 0;   // FuseDecomposedLayerNorms
  int fused_epilogues = 0;
  int split_products = 0;           // SplitConcatProducts
  int unexpanded_broadcasts = 0;    // ReadBroadcastsUnexpanded
  int fused_mul_adds = 0;           // FuseMulAdd
  int fused_product_mul_adds = 0;   // FuseProductMulAdds
  int merged_products = 0;          // MergeSiblingProducts
  int fused_elementwise = 0;        // FuseElementwiseChains
  int fused_attention = 0;          // FuseTargetAttention
  int fused_softmax_attention = 0;  // FuseSoftmaxAttention
  int fused_dot_interactions = 0;   // FuseDotInteractions
  int fused_embedding_concats = 0;  // FuseEmbeddingConcats
  int merged_tables = 0;            // MergeTablesSharingIds
  int narrowed_tables = 0;          // StoreTablesAs
  int keyed_tables = 0;             // KeyTables
  int merged_key_lookups = 0;       // MergeKeyedRows
  int ragged_inputs = 0;
  int hashed_string_inputs = 0;                      // HashStringsInGraph
  std::string hoisting = "off";                      // user-side hoisting: what runs once per user, or why nothing does
  std::vector<std::string> hoisting_gathers;         // the per-user values gathered to the candidates
  int hoisted_nodes = 0, hoisted_compute_nodes = 0;  // nodes run once per user, and those computing
  size_t shared_constant_bytes = 0;                  // ShareEqualConstants: held once with a model loaded before
};

// How one graph input is fed: from config input `config_index` (none for a hoisted graph's
// request index), as dense rows, ragged values or ragged offsets, or each candidate's user row.
struct InputBinding {
  size_t config_index;
  GraphInputKind kind;
};

// The plan's view of `prepared` (graph inputs built for `graph`): each input's shape with the
// graph's dtype.
std::vector<TensorMeta> MetasOf(const PreparedRequest& prepared, const Graph& graph);

class CompiledModel {
 public:
  // Runs the passes over `graph` for `config`, which is resolved against the graph first.
  static StatusOr<std::unique_ptr<CompiledModel>> Compile(Graph graph, ModelConfig config,
                                                          const CompileOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const Graph& graph() const { return graph_; }
  Precision precision() const { return precision_; }
  const CompileReport& report() const { return report_; }
  // One per graph input, in graph order; and their kinds alone, as MergeRequests takes them.
  const std::vector<InputBinding>& bindings() const { return bindings_; }
  const std::vector<GraphInputKind>& input_kinds() const { return input_kinds_; }
  // The config's ragged inputs, in the order their lengths are given (PlanOptions).
  const std::vector<std::string>& ragged_names() const { return ragged_names_; }
  // The graph's outputs, in order.
  const std::vector<std::string>& output_names() const { return output_names_; }
  // Whether the graph runs its user side once per user (HoistUserSide).
  bool hoisted() const { return hoisted_; }

  // Goes back to the graph as written, without hoisting, because `why` (a difference in scores the
  // caller found). Drops every cached plan. A load-time step: not thread-safe.
  Status Unhoist(const std::string& why);
  // Lets `edit` change the graph after the passes, for every plan built from now on (tables moved
  // to disk, embedding/disk_tables.h). It may append graph inputs after the request's, which the
  // runtime feeds: bindings() covers the request's alone. Drops every cached plan. A load-time step:
  // not thread-safe.
  Status EditGraph(const std::function<Status(Graph&)>& edit);
  // Keeps at least `count` plans (the warm-up buckets' and some). A load-time step.
  void KeepPlans(size_t count);

  // The plan for graph inputs of these dtypes and shapes and ragged inputs of these longest rows,
  // from the cache or built now.
  StatusOr<std::shared_ptr<const Plan>> PlanFor(const std::vector<TensorMeta>& graph_inputs,
                                                const std::vector<int64_t>& ragged_max_lengths) const;

 private:
  CompiledModel() = default;
  Status RunPasses();
  void BindGraphInputs();
  // A plan of graph_ at small probe shapes, whose value shapes the passes read.
  struct ShapeProbe {
    static constexpr int64_t kRows = 7;  // candidates; user rows are repeated to as many
    std::shared_ptr<const Plan> plan;
    std::vector<int> user_rows;                    // graph inputs of user rows
    std::vector<std::pair<int, int>> user_ragged;  // (values, offsets) of user ragged inputs
  };
  StatusOr<ShapeProbe> ProbeShapes() const;
  Status SplitProducts();
  Status StartHoisting();
  void DescribeHoisting();
  // FuseTargetAttention, FuseSoftmaxAttention, FuseDotInteractions, FuseProductMulAdds and
  // FuseElementwiseChains (with the fusion passes on), after hoisting: the attention reads per-user
  // values with the request index, and an element-wise group never mixes user-side and
  // candidate-side ops.
  Status FuseAfterHoisting();
  void ClearPlans();

  ModelConfig config_;
  Graph graph_;
  std::optional<Graph> unhoisted_;  // the graph as written, until the caller has checked hoisting
  CompileOptions options_;
  Precision precision_ = Precision::kFp32;
  CompileReport report_;
  std::vector<InputBinding> bindings_;
  std::vector<GraphInputKind> input_kinds_;
  std::vector<std::string> ragged_names_;
  std::vector<std::string> output_names_;
  bool hoisted_ = false;

  mutable Mutex mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const Plan>> plans_ RANKD_GUARDED_BY(mu_);
  mutable std::vector<std::string> plan_order_ RANKD_GUARDED_BY(mu_);
};

}  // namespace rankd
