// libFuzzer target: arbitrary bytes as a KServe v2 gRPC ModelInferRequest, turned into a request for
// the zoo models of zoo_model.h and scored when that succeeds. Shapes are declared freely by the
// input, so a builder that allocated before checking them against the values carried would exceed
// the RSS limit.
// The bytes are also read as the server reads them (infer_request_wire.h), split into slices where
// the first byte says: accepted exactly when protobuf accepts them, into the same message; and the
// model they name is peeked at as the server does (PeekNamedModel).
#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/grpc_request.h"
#include "frontend/infer_request_wire.h"
#include "serving/model.h"
#include "zoo_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rankd;
  const auto& models = ZooModels();
  if (models.empty()) __builtin_trap();  // run from the repository root
  inference::ModelInferRequest proto;
  const bool parsed = proto.ParseFromArray(data, static_cast<int>(size));

  const size_t stride = size ? data[0] % 64 + 1 : 1;
  std::vector<std::string_view> pieces;
  for (size_t at = 0; at < size; at += stride)
    pieces.emplace_back(reinterpret_cast<const char*>(data) + at, std::min(stride, size - at));
  // The peek the gRPC server chooses a call's thread by reads within the bytes, whatever they are.
  if (auto named = PeekNamedModel({reinterpret_cast<const char*>(data), size})) {
    if (named->name.data() < reinterpret_cast<const char*>(data) ||
        named->name.data() + named->name.size() > reinterpret_cast<const char*>(data) + size) {
      __builtin_trap();
    }
  }
  WireContents contents;
  auto read = ReadInferRequest(pieces, contents);
  if (read.ok() != parsed) __builtin_trap();
  if (!parsed) return 0;
  inference::ModelInferRequest rebuilt = *read;
  contents.PutBack(rebuilt);
  google::protobuf::util::DefaultFieldComparator floats;  // a NaN equals a NaN here
  floats.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer differ;
  differ.set_field_comparator(&floats);
  if (!differ.Compare(proto, rebuilt)) __builtin_trap();

  auto request = InferRequestFromProto(*read, contents, int64_t{1} << 16);
  if (request.ok() != InferRequestFromProto(proto, int64_t{1} << 16).ok()) __builtin_trap();
  if (!request.ok()) return 0;
  for (const auto& model : models) (void)model->Infer(request->request, request->length_sums);
  return 0;
}
