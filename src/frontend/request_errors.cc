#include "frontend/request_errors.h"

namespace rankd {
namespace {

std::string Input(const std::string& name) { return "input '" + name + "': "; }

// "24 bytes (3 values)", or "17 bytes" when they are not a whole number of values.
std::string BytesAndValues(uint64_t bytes, size_t value_size) {
  std::string s = std::to_string(bytes) + " bytes";
  if (value_size > 0 && bytes % value_size == 0) {
    const uint64_t values = bytes / value_size;
    s += " (" + std::to_string(values) + (values == 1 ? " value)" : " values)");
  }
  return s;
}

}  // namespace

Status UnsupportedDatatype(const std::string& input, const std::string& datatype) {
  return InvalidArgument(Input(input) + "datatype '" + datatype + "' is not supported");
}

Status NegativeShapeEntry(const std::string& input) {
  return InvalidArgument(Input(input) + "shape entries must be non-negative integers");
}

Status NoBatchDimension(const std::string& input) {
  return InvalidArgument(Input(input) + "shape must have a batch dimension");
}

Status ShapeTooLarge(const std::string& input, const Shape& shape) {
  return ResourceExhausted(Input(input) + "shape " + ShapeToString(shape) + " is too large");
}

Status ShapeDataMismatch(const std::string& input, const Shape& shape, DType dtype, uint64_t present_bytes) {
  const size_t size = DTypeSize(dtype);
  uint64_t need = size;
  for (int64_t d : shape) need *= static_cast<uint64_t>(d);
  return InvalidArgument(Input(input) + "shape " + ShapeToString(shape) + " of " + DTypeName(dtype) + " needs " +
                         BytesAndValues(need, size) + ", the request holds " + BytesAndValues(present_bytes, size));
}

Status StringCountMismatch(const std::string& input, const Shape& shape, int64_t present) {
  return InvalidArgument(Input(input) + "shape " + ShapeToString(shape) + " of BYTES needs " +
                         std::to_string(NumElements(shape)) + " strings, the request holds " + std::to_string(present));
}

Status LengthsNeedFlatShape(const std::string& input) {
  return InvalidArgument(Input(input) + "with lengths, shape must be [number of values]");
}

}  // namespace rankd
