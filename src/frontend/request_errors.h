// The messages for a request's mistakes that every wire format can make (JSON, the binary
// extension, gRPC's typed and raw contents), so that the same mistake gets the same status and
// message whichever protocol carried it (tests/server_test.py, SameMistakeSameAnswer).
#pragma once

#include <cstdint>
#include <string>

#include "rankd/status.h"
#include "rankd/tensor.h"

namespace rankd {

// A datatype rankd does not take as an input (unknown, or FP16/BF16).
Status UnsupportedDatatype(const std::string& input, const std::string& datatype);
// A shape entry below zero.
Status NegativeShapeEntry(const std::string& input);
// An empty shape.
Status NoBatchDimension(const std::string& input);
// A shape of more elements than the limit.
Status ShapeTooLarge(const std::string& input, const Shape& shape);
// A shape and values that disagree: `present_bytes` is what the request holds for the input
// (values sent as JSON or typed contents count as their dtype's size each).
Status ShapeDataMismatch(const std::string& input, const Shape& shape, DType dtype, uint64_t present_bytes);
// Lengths given with a shape that is not [number of values].
Status LengthsNeedFlatShape(const std::string& input);
// A BYTES input whose shape and number of strings differ.
Status StringCountMismatch(const std::string& input, const Shape& shape, int64_t present);

}  // namespace rankd
