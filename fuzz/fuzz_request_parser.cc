// libFuzzer target: arbitrary bytes as a KServe v2 inference request, both as a JSON body and
// split into a JSON header plus binary tensor data (the first byte picks the split); what parses is
// written back as a response and scored by the zoo models of zoo_model.h.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "frontend/kserve_json.h"
#include "serving/model.h"
#include "zoo_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rankd;
  std::string_view all(reinterpret_cast<const char*>(data), size);
  JsonLimits limits;
  limits.max_elements = 1 << 16;
  const auto& models = ZooModels();
  if (models.empty()) __builtin_trap();  // run from the repository root
  if (auto request = ParseInferRequestJson(all, limits); request.ok()) {
    for (const auto& model : models) (void)model->Infer(*request);
  }
  if (size > 1) {
    size_t split = 1 + data[0] % (size - 1);
    auto parsed = ParseInferRequest(all.substr(1, split - 1), all.substr(split), limits);
    if (parsed.ok()) {
      std::vector<InferOutput> outputs;
      for (const InferInput& in : parsed->request.inputs) {
        if (!in.is_bytes()) outputs.push_back({in.name, in.data});  // responses carry no strings
      }
      (void)MakeInferResponse("m", 1, parsed->request.id, outputs, parsed->binary_output_all, parsed->binary_outputs);
      for (const auto& model : models) (void)model->Infer(parsed->request, parsed->length_sums);
    }
  }
  return 0;
}
