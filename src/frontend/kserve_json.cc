#include "frontend/kserve_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "common/host_allocator.h"
#include "common/host_copies.h"
#include "frontend/bytes_elements.h"
#include "frontend/json_request_reader.h"
#include "frontend/request_errors.h"

namespace rankd {
namespace {

using nlohmann::json;

// Integers in T's range, held as T.
template <typename T>
Status FillInts(const JsonLeaves& leaves, Tensor& t, const std::string& name) {
  T* p = t.data<T>();
  for (size_t i = 0; i < leaves.size(); ++i) {
    JsonLeaves::Kind kind = leaves.kinds[i];
    if (kind != JsonLeaves::kInt && kind != JsonLeaves::kUnsigned) {
      return InvalidArgument("input '" + name + "': element " + std::to_string(i) + " is not an integer");
    }
    int64_t x = leaves.AsInt(i);
    if (kind == JsonLeaves::kUnsigned || x < static_cast<int64_t>(std::numeric_limits<T>::lowest()) ||
        x > static_cast<int64_t>(std::numeric_limits<T>::max())) {
      return InvalidArgument("input '" + name + "': element " + std::to_string(i) + " is out of range");
    }
    p[i] = static_cast<T>(x);
  }
  return Status::Ok();
}

// An input's `parameters.lengths`: the list ReadJsonRequest read into leaves, or nullptr when the
// parameter was there but not a list.
Status ReadLengths(const std::string& name, const JsonLeaves* lengths, std::vector<int64_t>& out) {
  if (!lengths) return InvalidArgument("input '" + name + "': parameters.lengths must be a list");
  if (!lengths->row_lengths.empty())
    return InvalidArgument("input '" + name + "': lengths must be non-negative integers");
  out.resize(lengths->size());
  for (size_t i = 0; i < lengths->size(); ++i) {
    if (lengths->kinds[i] != JsonLeaves::kInt || lengths->AsInt(i) < 0)
      return InvalidArgument("input '" + name + "': lengths must be non-negative integers");
    out[i] = lengths->AsInt(i);
  }
  return Status::Ok();
}

// Where an input's raw bytes are: in the binary part of the body (binary_data_size), or in a
// registered shared memory region (shared_memory_region, shared_memory_byte_size and
// shared_memory_offset; shared_memory_regions.h).
struct RawSource {
  uint64_t bytes = 0;
  const BinaryReader* body = nullptr;  // in the body's binary part, at `span`; else in `region`
  BinaryReader::Span span;
  SharedMemoryRegions::Use region;

  // Copies the bytes to `to`; a region's through `later` where given (SharedMemoryReads).
  Status Read(void* to, const std::string& name, SharedMemoryReads* later = nullptr) const {
    if (!body) return (later ? later->Read(region, to) : region.Read(to)).WithContext("input '" + name + "'");
    body->CopyTo(span, to);
    CountHostCopy(HostCopy::kRequest, bytes);
    return Status::Ok();
  }
  // Where the bytes can be read in place (a piece of a request tensor, or a region), else undefined.
  Tensor View(DType dtype, const Shape& shape) const {
    return body ? body->View(span, dtype, shape) : region.View(dtype, shape);
  }
};

// `check_size(bytes)` says whether the size given fits the input's shape, before the bytes are looked for.
template <typename CheckSize>
StatusOr<RawSource> FindRaw(JsonValue j, JsonValue params, const std::string& name, BinaryReader& binary,
                            const SharedMemoryRegions* shm, CheckSize&& check_size) {
  const bool in_region = params.contains("shared_memory_region");
  const char* size_key = in_region ? "shared_memory_byte_size" : "binary_data_size";
  if (in_region && params.contains("binary_data_size")) {
    return InvalidArgument("input '" + name + "' has both shared_memory_region and binary_data_size");
  }
  if (j.contains("data")) return InvalidArgument("input '" + name + "' has both 'data' and " + size_key);
  const JsonValue size = params[size_key];
  if (!size.is_number_unsigned()) {
    return InvalidArgument("input '" + name + "': " + size_key + " must be a non-negative integer");
  }
  RawSource raw;
  raw.bytes = size.uint64();
  RANKD_RETURN_IF_ERROR(check_size(raw.bytes));
  if (!in_region) {
    if (raw.bytes > binary.left()) return InvalidArgument("input '" + name + "': the body ends before its binary data");
    raw.body = &binary;
    raw.span = binary.Take(static_cast<size_t>(raw.bytes));
    return raw;
  }
  const JsonValue region = params["shared_memory_region"];
  const JsonValue offset = params["shared_memory_offset"];  // 0 where it is not given
  if (!region.is_string()) return InvalidArgument("input '" + name + "': shared_memory_region must be a string");
  if (offset.exists() && !offset.is_number_unsigned()) {
    return InvalidArgument("input '" + name + "': shared_memory_offset must be a non-negative integer");
  }
  if (!shm) return Unimplemented("input '" + name + "': shared memory is not served here");
  auto found = shm->Find(std::string(region.string()), offset.uint64(), raw.bytes);
  if (!found.ok()) return found.status().WithContext("input '" + name + "'");
  raw.region = std::move(*found);
  return raw;
}

// Elements in a concrete shape, or an error.
StatusOr<int64_t> ConcreteElements(const std::string& name, const Shape& shape, const JsonLimits& limits) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("input '" + name + "': binary inputs need a concrete shape");
    if (d != 0 && n > limits.max_elements / d) return ShapeTooLarge(name, shape);
    n *= d;
  }
  return n;
}

// An input whose values are raw little-endian bytes (RawSource).
// Bytes in shared memory or in a piece of a request tensor the body was read into are read in
// place where they can be (SharedMemoryRegions::Use::View, BinaryReader::View; not BOOL, whose
// bytes are normalised here), a region so read appended to `in_place`; others copied, a region's
// through `reads`.
StatusOr<InferInput> ParseRawInput(JsonValue j, DType dtype, const Shape& shape, JsonValue params,
                                   const JsonLeaves* lengths, const JsonLimits& limits, BinaryReader& binary,
                                   const SharedMemoryRegions* shm, std::vector<SharedMemoryRegions::Use>& in_place,
                                   SharedMemoryReads& reads, InferInput in) {
  const std::string& name = in.name;
  RANKD_ASSIGN_OR_RETURN(int64_t n, ConcreteElements(name, shape, limits));
  RANKD_ASSIGN_OR_RETURN(RawSource raw, FindRaw(j, params, name, binary, shm, [&](uint64_t bytes) {
                           return bytes == static_cast<uint64_t>(n) * DTypeSize(dtype)
                                      ? Status::Ok()
                                      : ShapeDataMismatch(name, shape, dtype, bytes);
                         }));
  if (lengths || params.contains("lengths")) {
    RANKD_RETURN_IF_ERROR(ReadLengths(name, lengths, in.lengths));
    if (shape.size() != 1) return LengthsNeedFlatShape(name);
  }
  if (Tensor view = dtype == DType::kBool ? Tensor() : raw.View(dtype, shape); view.defined()) {
    in.data = std::move(view);  // read where the client wrote it, or where the server read it to
    if (!raw.body) in_place.push_back(std::move(raw.region));
    return in;
  }
  in.data = Tensor::Empty(dtype, shape);  // every byte read next (FindRaw checked the count): no zero fill
  // BOOL's bytes are read now: they are normalised next.
  RANKD_RETURN_IF_ERROR(raw.Read(in.data.raw(), name, dtype == DType::kBool ? nullptr : &reads));
  if (dtype == DType::kBool) {
    for (int64_t i = 0; i < n; ++i) in.data.data<uint8_t>()[i] = in.data.data<uint8_t>()[i] ? 1 : 0;
  }
  return in;
}

// A BYTES input: strings in `data`, or their binary form (bytes_elements.h) in the body's binary
// part or a shared memory region.
StatusOr<InferInput> ParseBytesInput(JsonValue j, Shape shape, bool ragged_dim, JsonValue params,
                                     const JsonLeaves* lengths, const JsonLimits& limits, BinaryReader& binary,
                                     JsonRequestDocument& doc, const SharedMemoryRegions* shm, InferInput in) {
  const std::string& name = in.name;
  if (lengths || params.contains("lengths")) {
    RANKD_RETURN_IF_ERROR(ReadLengths(name, lengths, in.lengths));
    if (shape.size() != 1) return LengthsNeedFlatShape(name);
  }
  if (params.contains("binary_data_size") || params.contains("shared_memory_region")) {
    RANKD_ASSIGN_OR_RETURN(int64_t n, ConcreteElements(name, shape, limits));
    RANKD_ASSIGN_OR_RETURN(RawSource raw, FindRaw(j, params, name, binary, shm, [](uint64_t) { return Status::Ok(); }));
    // Read where they lie when one piece of the body holds them; else copied out of the pieces, or
    // out of the region first (its owner may change it while it is read).
    std::string_view bytes(raw.span.contiguous, raw.span.contiguous ? raw.span.bytes : 0);
    std::string copied;
    if (!raw.span.contiguous && raw.bytes) {
      copied.resize(raw.bytes);
      RANKD_RETURN_IF_ERROR(raw.Read(copied.data(), name));
      bytes = copied;
    }
    RANKD_ASSIGN_OR_RETURN(in.strings, DecodeBytesElements(bytes, n, name));
    in.strings.shape = std::move(shape);
    return in;
  }
  if (!j.contains("data")) return InvalidArgument("input '" + name + "' has no 'data' and no binary_data_size");
  JsonLeaves& leaves = doc.data[j["data"].uint64()];  // ReadJsonRequest's index
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (leaves.kinds[i] != JsonLeaves::kString)
      return InvalidArgument("input '" + name + "': element " + std::to_string(i) + " is not a string");
  }
  const auto count = static_cast<int64_t>(leaves.size());
  if (!in.lengths.empty()) {
    if (shape[0] != count) return StringCountMismatch(name, shape, count);
  } else if (ragged_dim) {
    if (shape.size() != 2 || shape[1] != -1 || shape[0] != static_cast<int64_t>(leaves.row_lengths.size())) {
      return InvalidArgument("input '" + name + "': a ragged input has shape [rows, -1] and one list per row");
    }
    in.lengths = leaves.row_lengths;
    shape = {count};
  } else {
    RANKD_ASSIGN_OR_RETURN(int64_t n, ConcreteElements(name, shape, limits));
    if (n != count) return StringCountMismatch(name, shape, count);
  }
  in.strings = std::move(leaves.strings);
  in.strings.shape = std::move(shape);
  return in;
}

// A requested output to be written into a shared memory region: where, checked against the region now.
StatusOr<SharedMemoryOutput> ParseSharedMemoryOutput(const std::string& name, JsonValue params,
                                                     const SharedMemoryRegions* shm) {
  const JsonValue region = params["shared_memory_region"];
  const JsonValue size = params["shared_memory_byte_size"];
  const JsonValue offset = params["shared_memory_offset"];  // 0 where it is not given
  if (!region.is_string() || !size.is_number_unsigned() || (offset.exists() && !offset.is_number_unsigned())) {
    return InvalidArgument("output '" + name +
                           "': shared_memory_region must be a string, shared_memory_byte_size and "
                           "shared_memory_offset non-negative integers");
  }
  if (!shm) return Unimplemented("output '" + name + "': shared memory is not served here");
  std::string region_name(region.string());
  auto found = shm->Find(region_name, offset.uint64(), size.uint64());
  if (!found.ok()) return found.status().WithContext("output '" + name + "'");
  return SharedMemoryOutput{name, std::move(region_name), std::move(*found)};
}

StatusOr<InferInput> ParseInput(JsonValue j, size_t index, const JsonLimits& limits, BinaryReader& binary,
                                JsonRequestDocument& doc, const SharedMemoryRegions* shm,
                                std::vector<SharedMemoryRegions::Use>& in_place, SharedMemoryReads& reads) {
  const JsonLeaves* lengths = doc.LengthsOf(index);
  if (!j.is_object()) return InvalidArgument("inputs[" + std::to_string(index) + "] must be an object");
  if (!j["name"].is_string()) return InvalidArgument("inputs[" + std::to_string(index) + "] needs a string 'name'");
  InferInput in;
  in.name = j["name"].string();
  const std::string& name = in.name;
  const JsonValue datatype = j["datatype"];
  if (!datatype.is_string()) return InvalidArgument("input '" + name + "' needs a string 'datatype'");
  const bool bytes = datatype.string() == "BYTES";
  auto dtype = bytes ? std::optional<DType>(DType::kU8) : DTypeFromName(datatype.string());
  if (!dtype || *dtype == DType::kF16 || *dtype == DType::kBF16)
    return UnsupportedDatatype(name, std::string(datatype.string()));
  if (!j["shape"].is_array()) return InvalidArgument("input '" + name + "' needs a 'shape' list");
  Shape shape;
  bool ragged_dim = false;
  for (JsonValue d : j["shape"]) {
    if (!d.is_number_integer() || d.int64() < -1 || (d.is_number_unsigned() && d.uint64() > (uint64_t{1} << 40))) {
      return NegativeShapeEntry(name);
    }
    if (d.int64() == -1) ragged_dim = true;
    shape.push_back(d.int64());
  }
  if (shape.empty()) return NoBatchDimension(name);
  const JsonValue params = j["parameters"];  // missing: every lookup in it finds nothing
  if (params.exists() && !params.is_object())
    return InvalidArgument("input '" + name + "': parameters must be an object");
  if (bytes)
    return ParseBytesInput(j, std::move(shape), ragged_dim, params, lengths, limits, binary, doc, shm, std::move(in));
  if (params.contains("binary_data_size") || params.contains("shared_memory_region"))
    return ParseRawInput(j, *dtype, shape, params, lengths, limits, binary, shm, in_place, reads, std::move(in));
  if (!j.contains("data")) return InvalidArgument("input '" + name + "' has no 'data' and no binary_data_size");
  const JsonLeaves& leaves = doc.data[j["data"].uint64()];  // ReadJsonRequest's index
  const std::vector<int64_t>& row_lengths = leaves.row_lengths;
  if (lengths || params.contains("lengths")) {
    RANKD_RETURN_IF_ERROR(ReadLengths(name, lengths, in.lengths));
    if (shape.size() != 1) return LengthsNeedFlatShape(name);
    if (shape[0] != static_cast<int64_t>(leaves.size()))
      return ShapeDataMismatch(name, shape, *dtype, leaves.size() * DTypeSize(*dtype));
  } else if (ragged_dim) {
    if (shape.size() != 2 || shape[1] != -1 || shape[0] != static_cast<int64_t>(row_lengths.size())) {
      return InvalidArgument("input '" + name + "': a ragged input has shape [rows, -1] and one list per row");
    }
    in.lengths = row_lengths;
    shape = {static_cast<int64_t>(leaves.size())};
  } else {
    int64_t n = 1;
    for (int64_t d : shape) {
      if (d != 0 && n > limits.max_elements / d) return ShapeTooLarge(name, shape);
      n *= d;
    }
    if (n != static_cast<int64_t>(leaves.size()))
      return ShapeDataMismatch(name, shape, *dtype, leaves.size() * DTypeSize(*dtype));
  }
  in.data = Tensor::Zeros(*dtype, shape);
  switch (*dtype) {
    case DType::kF32:
    case DType::kF64:
      for (size_t i = 0; i < leaves.size(); ++i) {
        if (leaves.kinds[i] == JsonLeaves::kBool || leaves.kinds[i] >= JsonLeaves::kString) {
          return InvalidArgument("input '" + name + "': element " + std::to_string(i) + " is not a number");
        }
        double x = leaves.AsDouble(i);
        if (*dtype == DType::kF32) {
          if (std::isfinite(x) && std::fabs(x) > std::numeric_limits<float>::max()) {
            return InvalidArgument("input '" + name + "': element " + std::to_string(i) + " overflows FP32");
          }
          in.data.data<float>()[i] = static_cast<float>(x);
        } else {
          in.data.data<double>()[i] = x;
        }
      }
      break;
    case DType::kBool:
      for (size_t i = 0; i < leaves.size(); ++i) {
        if (leaves.kinds[i] != JsonLeaves::kBool)
          return InvalidArgument("input '" + name + "': element " + std::to_string(i) + " is not a boolean");
        in.data.data<uint8_t>()[i] = leaves.values[i] ? 1 : 0;
      }
      break;
    case DType::kI64:
      RANKD_RETURN_IF_ERROR(FillInts<int64_t>(leaves, in.data, name));
      break;
    case DType::kI32:
      RANKD_RETURN_IF_ERROR(FillInts<int32_t>(leaves, in.data, name));
      break;
    case DType::kI8:
      RANKD_RETURN_IF_ERROR(FillInts<int8_t>(leaves, in.data, name));
      break;
    case DType::kU8:
      RANKD_RETURN_IF_ERROR(FillInts<uint8_t>(leaves, in.data, name));
      break;
    default:
      return InvalidArgument("input '" + name + "': unsupported datatype");
  }
  return in;
}

void AppendNumber(std::string& out, double v, bool is_float32) {
  char buf[64];
  std::to_chars_result r = is_float32 ? std::to_chars(buf, buf + sizeof(buf), static_cast<float>(v))
                                      : std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

}  // namespace

StatusOr<ParsedInferRequest> ParseInferRequest(std::string_view body, std::string_view binary, const JsonLimits& limits,
                                               const SharedMemoryRegions* shm) {
  return ParseInferRequest(body, BinaryPieces::Contiguous(binary), limits, shm);
}

StatusOr<ParsedInferRequest> ParseInferRequest(std::string_view body, const BinaryPieces& binary_part,
                                               const JsonLimits& limits, const SharedMemoryRegions* shm) {
  RequestTensorScope request_tensors;  // pinned where a GPU reads them (common/host_allocator.h)
  BinaryReader binary(binary_part);
  if (body.size() + binary.left() > limits.max_body_bytes) {
    return ResourceExhausted("the request body is " + std::to_string(body.size() + binary.left()) +
                             " bytes; the limit is " + std::to_string(limits.max_body_bytes));
  }
  if (body.empty()) return InvalidArgument("the request body is empty");
  RANKD_ASSIGN_OR_RETURN(JsonRequestDocument doc, ReadJsonRequest(body, {limits.max_elements, limits.max_depth}));
  const JsonValue j = doc.root.root();
  if (!j.is_object()) return InvalidArgument("the request body must be a JSON object");
  ParsedInferRequest parsed;
  InferRequest& r = parsed.request;
  if (j.contains("id")) {
    if (!j["id"].is_string()) return InvalidArgument("'id' must be a string");
    r.id = j["id"].string();
  }
  const JsonValue inputs = j["inputs"];
  if (!inputs.is_array()) return InvalidArgument("the request needs an 'inputs' list");
  const size_t input_count = inputs.size();
  if (input_count == 0) return InvalidArgument("the request's 'inputs' list is empty");
  r.inputs.reserve(input_count);
  parsed.length_sums.reserve(input_count);
  size_t i = 0;
  SharedMemoryReads reads;
  for (JsonValue input : inputs) {
    RANKD_ASSIGN_OR_RETURN(InferInput in,
                           ParseInput(input, i++, limits, binary, doc, shm, parsed.shared_memory_inputs, reads));
    // Summed while they are in cache: the model passes over them no more (common/parsed_request.h).
    parsed.length_sums.push_back(in.lengths.empty() ? LengthSums{} : SumLengths(in.lengths));
    r.inputs.push_back(std::move(in));
  }
  if (binary.left()) return InvalidArgument(std::to_string(binary.left()) + " bytes of binary data are left over");
  RANKD_RETURN_IF_ERROR(reads.Finish().WithContext("the inputs in CUDA shared memory"));
  if (j.contains("parameters")) {
    const JsonValue p = j["parameters"];
    if (!p.is_object()) return InvalidArgument("'parameters' must be an object");
    if (p.contains("binary_data_output")) {
      if (!p["binary_data_output"].is_boolean()) return InvalidArgument("binary_data_output must be true or false");
      parsed.binary_output_all = p["binary_data_output"].boolean();
    }
    for (const char* key : {"priority", "timeout"}) {  // Triton's request parameters
      const JsonValue v = p[key];
      if (!v.exists()) continue;
      int64_t limit = key[0] == 'p' ? 1000000 : int64_t{1} << 40;
      if (!v.is_number_unsigned() || v.uint64() > static_cast<uint64_t>(limit)) {
        return InvalidArgument(std::string("parameter '") + key + "' must be a non-negative integer");
      }
      if (key[0] == 'p')
        r.priority = static_cast<int>(v.int64());
      else
        r.timeout_us = v.int64();
    }
  }
  if (j.contains("outputs")) {
    if (!j["outputs"].is_array()) return InvalidArgument("'outputs' must be a list");
    for (JsonValue o : j["outputs"]) {
      if (!o.is_object() || !o["name"].is_string())
        return InvalidArgument("each requested output needs a string 'name'");
      std::string name(o["name"].string());
      const JsonValue params = o["parameters"];
      if (params.is_object() && params["binary_data"].boolean()) parsed.binary_outputs.push_back(name);
      if (params.is_object() && params.contains("shared_memory_region")) {
        RANKD_ASSIGN_OR_RETURN(SharedMemoryOutput out, ParseSharedMemoryOutput(name, params, shm));
        parsed.shared_memory_outputs.push_back(std::move(out));
      }
      r.outputs.push_back(std::move(name));
    }
  }
  return parsed;
}

StatusOr<InferRequest> ParseInferRequestJson(std::string_view body, const JsonLimits& limits) {
  RANKD_ASSIGN_OR_RETURN(ParsedInferRequest parsed, ParseInferRequest(body, std::string_view(), limits));
  return std::move(parsed.request);
}

InferResponseBody MakeInferResponse(const std::string& model_name, int64_t model_version, const std::string& id,
                                    const std::vector<InferOutput>& outputs, bool binary_all,
                                    const std::vector<std::string>& binary_outputs,
                                    const std::vector<SharedMemoryOutput>& regions) {
  InferResponseBody r;
  std::string out =
      "{\"model_name\":" + JsonQuoted(model_name) + ",\"model_version\":\"" + std::to_string(model_version) + "\"";
  if (!id.empty()) out += ",\"id\":" + JsonQuoted(id);
  out += ",\"outputs\":[";
  std::string tail;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i].data;
    bool binary =
        binary_all || std::find(binary_outputs.begin(), binary_outputs.end(), outputs[i].name) != binary_outputs.end();
    if (i) out += ',';
    out += "{\"name\":" + JsonQuoted(outputs[i].name) + ",\"datatype\":\"" + DTypeName(t.dtype()) + "\",\"shape\":[";
    for (int64_t d = 0; d < t.rank(); ++d) {
      if (d) out += ',';
      out += std::to_string(t.dim(d));
    }
    out += "]";
    auto region = std::find_if(regions.begin(), regions.end(),
                               [&](const SharedMemoryOutput& o) { return o.name == outputs[i].name; });
    if (region != regions.end()) {  // written there by WriteSharedMemoryOutputs
      out += ",\"parameters\":{\"shared_memory_region\":" + JsonQuoted(region->region) +
             ",\"shared_memory_byte_size\":" + std::to_string(t.bytes()) + "}}";
      continue;
    }
    if (binary) {
      out += ",\"parameters\":{\"binary_data_size\":" + std::to_string(t.bytes()) + "}}";
      tail.append(static_cast<const char*>(t.raw()), t.bytes());
      r.binary = true;
      continue;
    }
    out += ",\"data\":[";
    for (int64_t e = 0; e < t.size(); ++e) {
      if (e) out += ',';
      if (t.dtype() == DType::kBool) {
        out += t.data<uint8_t>()[e] ? "true" : "false";
      } else if (IsFloat(t.dtype())) {
        double v = t.ScalarAsDouble(e);
        if (std::isfinite(v))
          AppendNumber(out, v, t.dtype() != DType::kF64);
        else
          out += "null";  // JSON has no NaN; the client sees a null
      } else {
        out += std::to_string(t.ScalarAsInt(e));
      }
    }
    out += "]}";
  }
  out += "]}";
  r.json_length = out.size();
  r.body = std::move(out);
  r.body += tail;
  return r;
}

std::string InferResponseJson(const std::string& model_name, int64_t model_version, const std::string& id,
                              const std::vector<InferOutput>& outputs) {
  return MakeInferResponse(model_name, model_version, id, outputs, false, {}).body;
}

std::string JsonQuoted(std::string_view text) {
  // Printable ASCII without quotes or backslashes (every model and output name a response
  // repeats) stands as it is, with no JSON value made for it.
  if (std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; })) {
    std::string quoted;
    quoted.reserve(text.size() + 2);
    quoted += '"';
    quoted += text;
    quoted += '"';
    return quoted;
  }
  // Bytes that are not UTF-8 (a client's path or name repeated in an error) become U+FFFD
  // instead of an exception.
  return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ErrorJson(const std::string& message) { return "{\"error\":" + JsonQuoted(message) + "}"; }

}  // namespace rankd
