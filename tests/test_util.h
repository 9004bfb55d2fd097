// Helpers shared by the tests.
#pragma once

#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "common/tensor.h"
#include "model/graph.h"

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

}  // namespace rankd::testing
