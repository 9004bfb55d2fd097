#include "frontend/grpc_request.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "common/host_allocator.h"
#include "frontend/bytes_elements.h"
#include "frontend/request_errors.h"

namespace rankd {
namespace {

// Copies typed contents (their count checked by the caller) into a tensor: in one copy where the
// field holds the tensor's type (INT64 ids, FP32 values), else value by value. INT8 and UINT8
// values carried in wider fields must fit, as in JSON.
template <typename T, typename Field>
Status FillTyped(const Field& field, int64_t n, Tensor& t, const std::string& name) {
  using From = typename Field::value_type;
  T* out = t.data<T>();
  if constexpr (std::is_same_v<T, From>) {
    if (n > 0) std::memcpy(out, field.data(), static_cast<size_t>(n) * sizeof(T));
  } else if constexpr ((std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>)&&!std::is_same_v<From, bool>) {
    for (int64_t i = 0; i < n; ++i) {
      const From v = field.Get(static_cast<int>(i));
      if (std::cmp_less(v, std::numeric_limits<T>::min()) || std::cmp_greater(v, std::numeric_limits<T>::max())) {
        return InvalidArgument("input '" + name + "': value " + std::to_string(v) +
                               " is out of range for its datatype");
      }
      out[i] = static_cast<T>(v);
    }
  } else {
    const From* in = field.data();
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(in[i]);
  }
  return Status::Ok();
}

// How many typed values `contents` holds for `dtype` (-1: the datatype has no typed field here).
int64_t TypedCount(const inference::InferTensorContents& c, DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return c.fp32_contents_size();
    case DType::kF64:
      return c.fp64_contents_size();
    case DType::kI64:
      return c.int64_contents_size();
    case DType::kI32:
    case DType::kI8:
      return c.int_contents_size();
    case DType::kU8:
      return c.uint_contents_size();
    case DType::kBool:
      return c.bool_contents_size();
    default:
      return -1;
  }
}

// "3,0,2": counts of at most 12 digits, one comma between them (W1's 26 ragged inputs send about
// 7,000 of them a request). The commas are counted first (a vectorised pass), then the counts are
// written through a pointer: pushing them back kept the vector's end in memory and made this loop
// 6% of a served W1 request's CPU.
bool ParseLengthList(std::string_view text, std::vector<int64_t>& out) {
  out.clear();
  if (text.empty()) return true;
  const size_t n = static_cast<size_t>(std::count(text.begin(), text.end(), ',')) + 1;
  out.resize(n);
  int64_t* o = out.data();
  const char* p = text.data();
  const char* end = p + text.size();
  for (size_t i = 0; i < n; ++i) {
    const char* start = p;
    int64_t v = 0;
    while (p < end && static_cast<unsigned char>(*p - '0') <= 9) v = v * 10 + (*p++ - '0');
    if (p == start || p - start > 12) return false;
    o[i] = v;
    if (i + 1 < n && (p == end || *p++ != ',')) return false;  // a comma; the next round reads a count
  }
  return p == end;
}

// An unsigned integer parameter, as int64_param (tritonclient's form) or uint64_param; -1 for
// anything else, or a negative number.
int64_t UnsignedParam(const google::protobuf::Map<std::string, inference::InferParameter>& params,
                      const std::string& key, int64_t absent) {
  auto it = params.find(key);
  if (it == params.end()) return absent;
  const inference::InferParameter& v = it->second;
  if (v.parameter_choice_case() == inference::InferParameter::kInt64Param)
    return std::max<int64_t>(-1, v.int64_param());
  if (v.parameter_choice_case() == inference::InferParameter::kUint64Param && v.uint64_param() <= (uint64_t{1} << 62))
    return static_cast<int64_t>(v.uint64_param());
  return -1;
}

// Where a tensor's parameters put it in shared memory: the region, offset and byte size.
StatusOr<SharedMemoryOutput> SharedMemoryPlace(
    const std::string& what, const std::string& name,
    const google::protobuf::Map<std::string, inference::InferParameter>& params, const SharedMemoryRegions* shm) {
  const inference::InferParameter& region = params.at("shared_memory_region");
  const int64_t size = UnsignedParam(params, "shared_memory_byte_size", -1);
  const int64_t offset = UnsignedParam(params, "shared_memory_offset", 0);
  if (region.parameter_choice_case() != inference::InferParameter::kStringParam || size < 0 || offset < 0) {
    return InvalidArgument(what + " '" + name +
                           "': shared_memory_region must be a string, shared_memory_byte_size and "
                           "shared_memory_offset non-negative integers");
  }
  if (!shm) return Unimplemented(what + " '" + name + "': shared memory is not served here");
  auto found = shm->Find(region.string_param(), static_cast<uint64_t>(offset), static_cast<uint64_t>(size));
  if (!found.ok()) return found.status().WithContext(what + " '" + name + "'");
  return SharedMemoryOutput{name, region.string_param(), std::move(*found)};
}

// A BYTES input's strings: in its raw_input_contents entry (`raw_index`) or in shared memory, in
// the binary extension's form (bytes_elements.h), or typed, in the bytes_contents of the message's
// input `input` as `wire` holds them.
StatusOr<PackedStrings> BytesInput(const inference::ModelInferRequest::InferInputTensor& in, int input, int64_t n,
                                   const WireContents& wire, int raw_index, const SharedMemoryRegions* shm) {
  if (in.parameters().count("shared_memory_region")) {
    RANKD_ASSIGN_OR_RETURN(SharedMemoryOutput place, SharedMemoryPlace("input", in.name(), in.parameters(), shm));
    std::string copied(place.use.size, '\0');
    RANKD_RETURN_IF_ERROR(place.use.Read(copied.data()).WithContext("input '" + in.name() + "'"));
    return DecodeBytesElements(copied, n, in.name());
  }
  if (raw_index >= 0) {
    std::string scratch;
    return DecodeBytesElements(wire.View(raw_index, scratch), n, in.name());
  }
  if (const int64_t count = wire.string_count(input); count != n) {
    return StringCountMismatch(in.name(), Shape(in.shape().begin(), in.shape().end()), count);
  }
  PackedStrings s;
  wire.AppendStrings(input, s);
  return s;
}

}  // namespace

StatusOr<ParsedRequest> InferRequestFromProto(const inference::ModelInferRequest& p, int64_t max_elements,
                                              const SharedMemoryRegions* shm,
                                              std::vector<SharedMemoryOutput>* shm_outputs,
                                              std::vector<SharedMemoryRegions::Use>* shm_inputs) {
  return InferRequestFromProto(p, WireContents::Of(p), max_elements, shm, shm_outputs, shm_inputs);
}

StatusOr<ParsedRequest> InferRequestFromProto(const inference::ModelInferRequest& p, const WireContents& contents,
                                              int64_t max_elements, const SharedMemoryRegions* shm,
                                              std::vector<SharedMemoryOutput>* shm_outputs,
                                              std::vector<SharedMemoryRegions::Use>* shm_inputs) {
  RequestTensorScope request_tensors;  // pinned where a GPU reads them (common/host_allocator.h)
  ParsedRequest parsed;
  InferRequest& r = parsed.request;
  r.id = p.id();
  if (p.inputs().empty()) return InvalidArgument("the request has no inputs");
  // Inputs in shared memory have no raw_input_contents entry: the others have one each, in order.
  const auto in_region = [](const inference::ModelInferRequest::InferInputTensor& in) {
    return in.parameters().count("shared_memory_region") > 0;
  };
  const int carried =
      static_cast<int>(p.inputs_size() - std::count_if(p.inputs().begin(), p.inputs().end(), in_region));
  bool raw = contents.size() > 0;
  if (raw && contents.size() != carried) {
    return InvalidArgument("raw_input_contents has " + std::to_string(contents.size()) + " entries for " +
                           std::to_string(carried) + " inputs not in shared memory");
  }
  r.inputs.reserve(static_cast<size_t>(p.inputs_size()));
  parsed.length_sums.reserve(static_cast<size_t>(p.inputs_size()));
  SharedMemoryReads reads;  // the inputs copied out of CUDA regions, made together after the loop
  for (int i = 0, raw_index = 0; i < p.inputs_size(); ++i) {
    const auto& in = p.inputs(i);
    InferInput x;
    x.name = in.name();
    const bool bytes = in.datatype() == "BYTES";
    auto dtype = bytes ? std::optional<DType>(DType::kU8) : DTypeFromName(in.datatype());
    if (!dtype || *dtype == DType::kF16 || *dtype == DType::kBF16) return UnsupportedDatatype(in.name(), in.datatype());
    Shape shape(in.shape().begin(), in.shape().end());
    if (shape.empty()) return NoBatchDimension(in.name());
    int64_t n = 1;
    for (int64_t d : shape) {
      if (d < 0) return NegativeShapeEntry(in.name());
      if (d != 0 && n > max_elements / d) return ShapeTooLarge(in.name(), shape);
      n *= d;
    }
    auto lengths = in.parameters().find("lengths");
    if (lengths != in.parameters().end()) {
      if (!ParseLengthList(lengths->second.string_param(), x.lengths)) {
        return InvalidArgument("input '" + in.name() + "': lengths must be a comma-separated list of counts");
      }
      if (shape.size() != 1) return LengthsNeedFlatShape(in.name());
    }
    if (bytes) {
      const int bytes_index = !in_region(in) && raw ? raw_index++ : -1;
      RANKD_ASSIGN_OR_RETURN(x.strings, BytesInput(in, i, n, contents, bytes_index, shm));
      x.strings.shape = std::move(shape);
      parsed.length_sums.push_back(x.lengths.empty() ? LengthSums{} : SumLengths(x.lengths));
      r.inputs.push_back(std::move(x));
      continue;
    }
    // The values present are checked against the declared shape before anything is allocated.
    const size_t need = static_cast<size_t>(n) * DTypeSize(*dtype);
    if (in_region(in)) {
      RANKD_ASSIGN_OR_RETURN(SharedMemoryOutput place, SharedMemoryPlace("input", in.name(), in.parameters(), shm));
      if (place.use.size != need) return ShapeDataMismatch(in.name(), shape, *dtype, place.use.size);
      if (Tensor view = shm_inputs ? place.use.View(*dtype, shape) : Tensor(); view.defined()) {
        x.data = std::move(view);  // read where the client wrote it
        shm_inputs->push_back(std::move(place.use));
      } else {
        x.data = Tensor::Empty(*dtype, shape);
        RANKD_RETURN_IF_ERROR(reads.Read(place.use, x.data.raw()).WithContext("input '" + in.name() + "'"));
      }
    } else if (raw) {
      const int index = raw_index++;
      if (contents.bytes(index) != need) return ShapeDataMismatch(in.name(), shape, *dtype, contents.bytes(index));
      x.data = Tensor::Empty(*dtype, shape);
      contents.CopyTo(index, x.data.raw());  // from the wire's slices to the request tensor: the one copy
    } else if (int64_t have = TypedCount(in.contents(), *dtype); have != n) {
      return ShapeDataMismatch(in.name(), shape, *dtype, static_cast<uint64_t>(have) * DTypeSize(*dtype));
    } else {
      x.data = Tensor::Empty(*dtype, shape);
      const auto& c = in.contents();
      switch (*dtype) {
        case DType::kF32:
          RANKD_RETURN_IF_ERROR(FillTyped<float>(c.fp32_contents(), n, x.data, x.name));
          break;
        case DType::kF64:
          RANKD_RETURN_IF_ERROR(FillTyped<double>(c.fp64_contents(), n, x.data, x.name));
          break;
        case DType::kI64:
          RANKD_RETURN_IF_ERROR(FillTyped<int64_t>(c.int64_contents(), n, x.data, x.name));
          break;
        case DType::kI32:
          RANKD_RETURN_IF_ERROR(FillTyped<int32_t>(c.int_contents(), n, x.data, x.name));
          break;
        case DType::kI8:
          RANKD_RETURN_IF_ERROR(FillTyped<int8_t>(c.int_contents(), n, x.data, x.name));
          break;
        case DType::kU8:
          RANKD_RETURN_IF_ERROR(FillTyped<uint8_t>(c.uint_contents(), n, x.data, x.name));
          break;
        case DType::kBool:
          RANKD_RETURN_IF_ERROR(FillTyped<uint8_t>(c.bool_contents(), n, x.data, x.name));
          break;
        default:
          return InvalidArgument("input '" + in.name() + "': unsupported datatype");
      }
    }
    // Summed while they are in cache: the model passes over them no more (common/parsed_request.h).
    parsed.length_sums.push_back(x.lengths.empty() ? LengthSums{} : SumLengths(x.lengths));
    r.inputs.push_back(std::move(x));
  }
  RANKD_RETURN_IF_ERROR(reads.Finish().WithContext("the inputs in CUDA shared memory"));
  for (const auto& o : p.outputs()) {
    r.outputs.push_back(o.name());
    if (!o.parameters().count("shared_memory_region")) continue;
    RANKD_ASSIGN_OR_RETURN(SharedMemoryOutput place, SharedMemoryPlace("output", o.name(), o.parameters(), shm));
    if (shm_outputs) shm_outputs->push_back(std::move(place));
  }
  for (const auto& [key, value] : p.parameters()) {
    if (key != "priority" && key != "timeout") continue;
    // Triton's clients send both as uint64_param; int64_param is accepted too.
    const uint64_t limit = key == "priority" ? 1000000 : uint64_t{1} << 40;
    uint64_t given = limit + 1;  // refused unless an integer in range is given
    if (value.parameter_choice_case() == inference::InferParameter::kUint64Param) given = value.uint64_param();
    if (value.parameter_choice_case() == inference::InferParameter::kInt64Param && value.int64_param() >= 0)
      given = static_cast<uint64_t>(value.int64_param());
    if (given > limit) {
      return InvalidArgument("parameter '" + key + "' must be a non-negative integer (uint64 or int64) up to " +
                             std::to_string(limit));
    }
    const auto number = static_cast<int64_t>(given);
    if (key == "priority")
      r.priority = static_cast<int>(number);
    else
      r.timeout_us = number;
  }
  return parsed;
}

}  // namespace rankd
