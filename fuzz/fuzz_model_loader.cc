// libFuzzer target: arbitrary bytes as an ONNX model through import, the load-time passes, the
// backend check and a plan for a one-row request, then the shape-reading passes and a plan again. Any crash, leak or
// sanitizer report is a bug; errors are expected.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "compile/passes.h"
#include "compile/plan.h"
#include "model/config.h"
#include "model/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rankd;
  OnnxImportOptions options;
  options.external_data_dir = "/nonexistent";  // never read files named by fuzzed input
  auto graph = ImportOnnxBytes(data, size, options);
  if (!graph.ok()) return 0;
  if (!FuseSegmentBags(*graph).ok()) return 0;  // a load's first pass, on the unchecked graph
  ModelConfig config;
  if (!ResolveModelConfig(*graph, config).ok()) return 0;
  if (!LowerSplits(*graph).ok()) return 0;
  if (!FoldConstants(*graph, int64_t{1} << 24).ok()) return 0;
  RemoveDeadNodes(*graph);
  // As Model::Prepare: the fusion passes on a checked graph. They also read unchecked nodes within
  // their inputs (layernorm_fusion_test, embedding_test), which this target no longer reaches.
  if (!CpuBackend().CheckGraph(*graph).ok()) return 0;
  FuseMaskedEmbeddingBags(*graph);
  FuseDecomposedLayerNorms(*graph);
  if (!CpuBackend().CheckGraph(*graph).ok()) return 0;
  std::vector<TensorMeta> inputs;
  for (int id : graph->inputs) {
    const Value& v = graph->values[static_cast<size_t>(id)];
    Shape s = v.shape;
    for (int64_t& d : s) d = d < 0 ? 1 : std::min<int64_t>(d, 64);
    inputs.push_back({v.dtype, s, nullptr});
  }
  PlanOptions plan_options;
  plan_options.max_workspace_bytes = int64_t{1} << 26;
  auto plan = Plan::Build(*graph, inputs, plan_options);
  if (!plan.ok()) return 0;
  // The passes that read value shapes, with this plan as their probe, then a plan of the result.
  std::vector<PlanValue> shapes = (*plan)->values();
  SplitConcatProducts(*graph, shapes);
  ReadBroadcastsUnexpanded(*graph);
  FuseMulAdd(*graph, shapes);
  FuseGemmEpilogues(*graph);
  FuseEmbeddingConcats(*graph);
  // An equivalent rewrite never makes a plannable graph unplannable (a larger workspace aside).
  auto rewritten = Plan::Build(*graph, inputs, plan_options);
  if (!rewritten.ok() && rewritten.status().code() != StatusCode::kResourceExhausted) __builtin_trap();
  return 0;
}
