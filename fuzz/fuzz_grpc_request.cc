// libFuzzer target: arbitrary bytes as a KServe v2 gRPC ModelInferRequest, turned into a request for
// the zoo's MMoE and W4s and scored when that succeeds. Shapes are declared freely by the input, so a builder
// that allocated before checking them against the values carried would exceed the RSS limit.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "frontend/grpc_request.h"
#include "serving/model.h"
#include "zoo_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rankd;
  const auto& models = ZooModels();
  if (models.empty()) __builtin_trap();  // run from the repository root
  inference::ModelInferRequest proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto request = InferRequestFromProto(proto, int64_t{1} << 16);
  if (!request.ok()) return 0;
  for (const auto& model : models) (void)model->Infer(request->request, request->length_sums);
  return 0;
}
