// libFuzzer target: arbitrary bytes as a model config, in YAML, JSON or Triton's protobuf text
// (the first byte picks),
// then resolved against the zoo's MMoE graph. Errors are expected; crashes, leaks and hangs are bugs.
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/config.h"
#include "model/onnx_import.h"

namespace {

const rankd::Graph* ZooGraph() {
  static const rankd::Graph* graph = [] {
    auto g = rankd::ImportOnnxFile("models/zoo/mmoe/1/model.onnx");
    return g.ok() ? new rankd::Graph(std::move(*g)) : nullptr;
  }();
  return graph;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rankd;
  if (size == 0) return 0;
  const Graph* graph = ZooGraph();
  if (!graph) __builtin_trap();  // run from the repository root
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto config = data[0] % 3 == 2 ? ParseTritonModelConfig(text) : ParseModelConfig(text, data[0] % 3 == 0);
  if (!config.ok()) return 0;
  Graph copy = *graph;
  (void)ResolveModelConfig(copy, *config);
  return 0;
}
