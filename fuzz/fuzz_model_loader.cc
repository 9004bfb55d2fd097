// libFuzzer target: arbitrary bytes as an ONNX model through import, the load-time passes, the
// backend check and a plan for a one-row request. Any crash, leak or sanitizer report is a bug;
// errors are expected.
#include <cstddef>
#include <cstdint>

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
  ModelConfig config;
  if (!ResolveModelConfig(*graph, config).ok()) return 0;
  if (!FoldConstants(*graph, int64_t{1} << 24).ok()) return 0;
  RemoveDeadNodes(*graph);
  FuseMaskedEmbeddingBags(*graph);
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
  (void)Plan::Build(*graph, inputs, plan_options);
  return 0;
}
