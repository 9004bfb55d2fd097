// ONNX import: ModelProto -> Graph.
//
// Reads opsets 13 to 21 of the default domain, initializers inline or in external-data files
// (memory-mapped, so tables larger than 2 GB load without a copy), and Constant nodes, which become
// graph constants. Ops are not checked here: the backend says what it supports (backend/backend.h).
// Between opsets 13 and 21 the ops rankd runs changed in two ways that matter, both from 18:
// ReduceMean, ReduceMax and ReduceMin take their axes as an input, as ReduceSum does from 13 (the
// reduce schema reads either), and Split's equal parts round up (`num_outputs`; LowerSplits); Gelu
// is new at 20 (LowerGelus turns it into element-wise ops). The other new versions add types rankd does not run
// (float8, int4, strings), refused where they appear, or attributes only those types use (Cast's `saturate`).
#pragma once

#include <string>

#include "model/graph.h"
#include "rankd/status.h"

namespace rankd {

struct OnnxImportOptions {
  // Directory external-data locations are relative to; empty means "the model file's directory".
  std::string external_data_dir;
  int64_t min_opset = 13;
  int64_t max_opset = 21;
};

// Parses an ONNX file. Errors name the file and what is wrong with it.
StatusOr<Graph> ImportOnnxFile(const std::string& path, const OnnxImportOptions& options = {});
// Parses serialized ModelProto bytes (used by the fuzzer and tests). External data is resolved
// against options.external_data_dir.
StatusOr<Graph> ImportOnnxBytes(const void* data, size_t size, const OnnxImportOptions& options);

// Reads a serialized TensorProto (the ONNX test-data format: input_0.pb, output_0.pb).
StatusOr<Tensor> ReadTensorProtoFile(const std::string& path);

}  // namespace rankd
