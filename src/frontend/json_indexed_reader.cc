// ReadJsonRequestIndexed: the request body read by simdjson's On-Demand parser into the same
// JsonRequestDocument the streaming reader builds (json_request_reader.h), with the same limits
// and the same messages. simdjson finds every structural character of the body in one vectorised
// pass, then the tree is walked once: the inputs' `data` and `parameters.lengths` straight into
// leaves, everything else (a few hundred bytes) into the small nlohmann document.
// Errors come back as codes, never as exceptions: a conversion that could throw does not compile.
#define SIMDJSON_EXCEPTIONS 0
#include <simdjson.h>

#include <algorithm>
#include <bit>
#include <string>

#include "frontend/json_request_reader.h"

namespace rankd {
namespace {

using nlohmann::json;
namespace od = simdjson::ondemand;

constexpr int kMaxDocumentDepth = 32;                   // outside `data`: objects and lists in lists
constexpr size_t kKeptParserBytes = size_t{256} << 10;  // a thread keeps its parser for bodies up to this

Status NotJson() { return InvalidArgument("the request body is not valid JSON"); }

#define RANKD_JSON(expr)                               \
  do {                                                 \
    if ((expr) != simdjson::SUCCESS) return NotJson(); \
  } while (0)

// fn(key, value) for each field of `o`, stopping at the first error.
template <typename F>
Status ForEachField(od::object& o, F&& fn) {
  for (auto field : o) {
    std::string_view key;
    RANKD_JSON(field.unescaped_key().get(key));
    od::value v;
    RANKD_JSON(field.value().get(v));
    RANKD_RETURN_IF_ERROR(fn(key, v));
  }
  return Status::Ok();
}

// fn(value) for each element of `a`, stopping at the first error.
template <typename F>
Status ForEachElement(od::array& a, F&& fn) {
  for (auto element : a) {
    od::value v;
    RANKD_JSON(element.get(v));
    RANKD_RETURN_IF_ERROR(fn(v));
  }
  return Status::Ok();
}

// A number as nlohmann reads it: an int64, else a uint64, else a double (an integer past 64 bits
// too), as a leaf's kind and bits.
Status Number(od::value& v, JsonLeaves::Kind& kind, uint64_t& bits) {
  od::number_type nt;
  RANKD_JSON(v.get_number_type().get(nt));
  if (nt == od::number_type::signed_integer) {
    int64_t x;
    RANKD_JSON(v.get_int64().get(x));
    kind = JsonLeaves::kInt;
    bits = static_cast<uint64_t>(x);
    return Status::Ok();
  }
  if (nt == od::number_type::unsigned_integer && v.get_uint64().get(bits) == simdjson::SUCCESS) {
    kind = JsonLeaves::kUnsigned;
    return Status::Ok();
  }
  double d;
  RANKD_JSON(v.get_double().get(d));
  kind = JsonLeaves::kFloat;
  bits = std::bit_cast<uint64_t>(d);
  return Status::Ok();
}

class Walker {
 public:
  // `padded_end`: the end of the body's padded buffer.
  Walker(const JsonReadLimits& limits, const char* padded_end) : limits_(limits), padded_end_(padded_end) {}

  Status Root(od::document& doc, std::string_view body) {
    od::json_type type;
    RANKD_JSON(doc.type().get(type));
    if (type != od::json_type::object) {
      // Not a request: the caller refuses any root but an object. Still read it whole, so that
      // a body that is not JSON at all says so.
      if (type == od::json_type::array) {
        od::array a;
        RANKD_JSON(doc.get_array().get(a));
        json out = json::array();
        RANKD_RETURN_IF_ERROR(Array(a, 1, out));
        doc_.root = std::move(out);
        return AtEnd(doc);
      }
      doc_.root = json::parse(body, nullptr, false);  // a scalar body
      return doc_.root.is_discarded() ? NotJson() : Status::Ok();
    }
    od::object root;
    RANKD_JSON(doc.get_object().get(root));
    doc_.root = json::object();
    RANKD_RETURN_IF_ERROR(ForEachField(root, [&](std::string_view key, od::value& v) -> Status {
      od::json_type t;
      RANKD_JSON(v.type().get(t));
      if (key != "inputs" || t != od::json_type::array) return Value(v, 2, doc_.root[std::string(key)]);
      od::array inputs;
      RANKD_JSON(v.get_array().get(inputs));
      return Inputs(inputs);
    }));
    return AtEnd(doc);
  }

  JsonRequestDocument Take() { return std::move(doc_); }

 private:
  // Whether `v` is the token null (a token that only starts like it is not).
  static bool IsNull(od::value& v) {
    bool null = false;
    return v.is_null().get(null) == simdjson::SUCCESS && null;
  }

  // OK when nothing follows the root value.
  static Status AtEnd(od::document& doc) {
    const char* trailing = nullptr;
    if (doc.current_location().get(trailing) == simdjson::SUCCESS) return NotJson();
    return Status::Ok();
  }

  // The top-level `inputs` list: each object's data and lengths into leaves.
  Status Inputs(od::array& inputs) {
    json& list = doc_.root["inputs"] = json::array();
    return ForEachElement(inputs, [&](od::value& v) -> Status {
      od::json_type t;
      RANKD_JSON(v.type().get(t));
      list.push_back(json());
      if (t != od::json_type::object) return Value(v, 3, list.back());
      od::object input;
      RANKD_JSON(v.get_object().get(input));
      return Input(input, list.size() - 1, list.back());
    });
  }

  Status Input(od::object& input, size_t index, json& out) {
    out = json::object();
    return ForEachField(input, [&](std::string_view key, od::value& v) -> Status {
      if (key == "data") {
        doc_.data.emplace_back();
        out["data"] = doc_.data.size() - 1;
        return Leaves(v, out, index, doc_.data.back());
      }
      od::json_type t;
      RANKD_JSON(v.type().get(t));
      if (key != "parameters" || t != od::json_type::object) return Value(v, 4, out[std::string(key)]);
      od::object params;
      RANKD_JSON(v.get_object().get(params));
      return Parameters(params, out, index);
    });
  }

  // An input's parameters: a `lengths` list into leaves, out of the document.
  Status Parameters(od::object& params, json& input, size_t index) {
    json& out = input["parameters"] = json::object();
    return ForEachField(params, [&](std::string_view key, od::value& v) -> Status {
      od::json_type t;
      RANKD_JSON(v.type().get(t));
      if (key != "lengths" || t != od::json_type::array) return Value(v, 5, out[std::string(key)]);
      if (doc_.lengths_of_input.size() <= index) doc_.lengths_of_input.resize(index + 1, -1);
      doc_.lengths_of_input[index] = static_cast<int>(doc_.lengths.size());
      doc_.lengths.emplace_back();
      return Leaves(v, input, index, doc_.lengths.back());
    });
  }

  // `data` (or a lengths list) of input `index`, whose document so far is `input`.
  Status Leaves(od::value& v, const json& input, size_t index, JsonLeaves& leaves) {
    input_ = &input;
    index_ = index;
    leaves_ = &leaves;
    od::json_type t;
    RANKD_JSON(v.type().get(t));
    if (t != od::json_type::array) return Scalar(v, t);  // a scalar or an object: one leaf
    od::array a;
    RANKD_JSON(v.get_array().get(a));
    std::string_view raw;
    RANKD_JSON(a.raw_json().get(raw));
    if (1 <= limits_.max_depth && ReadIntegerList(raw, limits_.max_elements, leaves)) return Status::Ok();
    // Not a flat list of integers (or past the element limit): read again, value by value, from
    // the list's own text (the body around it stays in the padded buffer, so reading past its end
    // is in bounds).
    leaves = JsonLeaves{};
    const size_t room = static_cast<size_t>(padded_end_ - raw.data());
    thread_local od::parser kept;  // as the body's: a thread keeps only a small parser
    od::parser fresh;
    od::parser& parser = raw.size() <= kKeptParserBytes ? kept : fresh;
    od::document list;
    if (parser.iterate(raw.data(), raw.size(), room).get(list) != simdjson::SUCCESS) return NotJson();
    od::array again;
    RANKD_JSON(list.get_array().get(again));
    RANKD_RETURN_IF_ERROR(List(again, 1));
    return AtEnd(list);
  }

  // A flat list of JSON integers that fit in 64 bits ("[3, 0,12]"), as kInt leaves: the lengths of
  // every ragged input, and most ids. False for anything else, and past `max_elements`. The leaves
  // are sized once from the commas (W1's HTTP header holds 26 lists of ~270 lengths: growing them
  // element by element reallocated each list ten times).
  static bool ReadIntegerList(std::string_view raw, int64_t max_elements, JsonLeaves& leaves) {
    const char* p = raw.data();
    const char* end = p + raw.size();
    auto space = [&] {
      while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')) ++p;
    };
    ++p;  // '['
    space();
    if (p < end && *p == ']') return true;
    const size_t most = static_cast<size_t>(std::count(p, end, ',')) + 1;  // a valid list has exactly this many
    if (static_cast<int64_t>(most) > max_elements) return false;
    leaves.values.resize(most);
    uint64_t* out = leaves.values.data();
    size_t count = 0;
    while (p < end && count < most) {
      const bool negative = *p == '-';
      if (negative) ++p;
      const char* digits = p;
      uint64_t x = 0;
      while (p < end && *p >= '0' && *p <= '9') x = x * 10 + static_cast<uint64_t>(*p++ - '0');
      const ptrdiff_t n = p - digits;
      // JSON has no leading zeros; 18 digits always fit, longer numbers go the general way.
      if (n == 0 || n > 18 || (n > 1 && *digits == '0')) return false;
      out[count++] = negative ? 0 - x : x;
      space();
      if (p == end) return false;
      if (*p == ']') {
        if (++p != end || count != most) return false;
        leaves.kinds.assign(count, JsonLeaves::kInt);
        return true;
      }
      if (*p++ != ',') return false;
      space();
    }
    return false;
  }

  // A list inside data with `open` lists open (itself included).
  Status List(od::array& a, int open) {
    int64_t count = 0;
    RANKD_RETURN_IF_ERROR(ForEachElement(a, [&](od::value& v) -> Status {
      if (open > limits_.max_depth) return InvalidArgument("input '" + InputName() + "': data is nested too deeply");
      ++count;
      int64_t x;  // the common case first: an integer that fits (ids, lengths)
      if (v.get_int64().get(x) == simdjson::SUCCESS) return Leaf(JsonLeaves::kInt, static_cast<uint64_t>(x));
      od::json_type t;
      RANKD_JSON(v.type().get(t));
      if (t != od::json_type::array) return Scalar(v, t);
      od::array child;
      RANKD_JSON(v.get_array().get(child));
      return List(child, open + 1);
    }));
    if (open == 2) leaves_->row_lengths.push_back(count);
    return Status::Ok();
  }

  // A value inside data that is not a list: a number, a bool, a string, or one leaf of another kind
  // (null, an object: checked, not kept).
  Status Scalar(od::value& v, od::json_type t) {
    switch (t) {
      case od::json_type::number: {
        JsonLeaves::Kind kind;
        uint64_t bits;
        RANKD_RETURN_IF_ERROR(Number(v, kind, bits));
        return Leaf(kind, bits);
      }
      case od::json_type::boolean: {
        bool b;
        RANKD_JSON(v.get_bool().get(b));
        return Leaf(JsonLeaves::kBool, b ? 1 : 0);
      }
      case od::json_type::string: {
        std::string_view text;
        RANKD_JSON(v.get_string().get(text));
        return Leaf(JsonLeaves::kString, 0, text);
      }
      default:
        RANKD_RETURN_IF_ERROR(Check(v));
        return Leaf(JsonLeaves::kOther, 0);
    }
  }

  // Reads a value through, keeping nothing: a body that is not JSON fails wherever it is.
  Status Check(od::value& v) {
    od::json_type t;
    RANKD_JSON(v.type().get(t));
    switch (t) {
      case od::json_type::object: {
        od::object o;
        RANKD_JSON(v.get_object().get(o));
        return ForEachField(o, [&](std::string_view, od::value& child) { return Check(child); });
      }
      case od::json_type::array: {
        od::array a;
        RANKD_JSON(v.get_array().get(a));
        return ForEachElement(a, [&](od::value& child) { return Check(child); });
      }
      case od::json_type::string: {
        std::string_view text;
        RANKD_JSON(v.get_string().get(text));
        return Status::Ok();
      }
      case od::json_type::null:
        return IsNull(v) ? Status::Ok() : NotJson();
      case od::json_type::boolean: {
        bool b;
        RANKD_JSON(v.get_bool().get(b));
        return Status::Ok();
      }
      default: {  // a number
        JsonLeaves::Kind kind;
        uint64_t bits;
        return Number(v, kind, bits);
      }
    }
  }

  // A leaf; a string's text is kept in the leaves' strings, its index the leaf's value.
  Status Leaf(JsonLeaves::Kind kind, uint64_t bits, std::string_view text = {}) {
    if (static_cast<int64_t>(leaves_->kinds.size()) >= limits_.max_elements) {
      return ResourceExhausted("input '" + InputName() + "' has more than " + std::to_string(limits_.max_elements) +
                               " elements");
    }
    if (kind == JsonLeaves::kString) {
      bits = static_cast<uint64_t>(leaves_->strings.size());
      leaves_->strings.Append(text);
    }
    leaves_->kinds.push_back(kind);
    leaves_->values.push_back(bits);
    return Status::Ok();
  }

  std::string InputName() const {
    auto name = input_->find("name");
    if (name != input_->end() && name->is_string()) return name->get<std::string>();
    return "inputs[" + std::to_string(index_) + "]";
  }

  // Any value into the document, `depth` containers deep.
  Status Value(od::value& v, int depth, json& out) {
    od::json_type t;
    RANKD_JSON(v.type().get(t));
    switch (t) {
      case od::json_type::object: {
        if (depth >= kMaxDocumentDepth) return InvalidArgument("the request body nests too deeply");
        od::object o;
        RANKD_JSON(v.get_object().get(o));
        out = json::object();
        return ForEachField(
            o, [&](std::string_view key, od::value& child) { return Value(child, depth + 1, out[std::string(key)]); });
      }
      case od::json_type::array: {
        if (depth >= kMaxDocumentDepth) return InvalidArgument("the request body nests too deeply");
        od::array a;
        RANKD_JSON(v.get_array().get(a));
        out = json::array();
        return Array(a, depth + 1, out);
      }
      case od::json_type::number: {
        JsonLeaves::Kind kind;
        uint64_t bits;
        RANKD_RETURN_IF_ERROR(Number(v, kind, bits));
        if (kind == JsonLeaves::kFloat) {
          out = std::bit_cast<double>(bits);
        } else if (kind == JsonLeaves::kInt && static_cast<int64_t>(bits) < 0) {
          out = static_cast<int64_t>(bits);
        } else {
          out = bits;  // nlohmann reads a non-negative integer as unsigned
        }
        return Status::Ok();
      }
      case od::json_type::string: {
        std::string_view s;
        RANKD_JSON(v.get_string().get(s));
        out = std::string(s);
        return Status::Ok();
      }
      case od::json_type::boolean: {
        bool b;
        RANKD_JSON(v.get_bool().get(b));
        out = b;
        return Status::Ok();
      }
      case od::json_type::null: {
        if (!IsNull(v)) return NotJson();
        out = nullptr;
        return Status::Ok();
      }
    }
    return NotJson();
  }

  Status Array(od::array& a, int depth, json& out) {
    return ForEachElement(a, [&](od::value& v) {
      out.push_back(json());
      return Value(v, depth, out.back());
    });
  }

  const JsonReadLimits& limits_;
  const char* padded_end_;
  JsonRequestDocument doc_;
  const json* input_ = nullptr;   // the input whose data is being read
  size_t index_ = 0;              // its place in `inputs`
  JsonLeaves* leaves_ = nullptr;  // where its data goes
};

#undef RANKD_JSON

}  // namespace

StatusOr<JsonRequestDocument> ReadJsonRequestIndexed(std::string_view body, const JsonReadLimits& limits) {
  // simdjson reads up to 64 bytes past the end: the body is copied into a padded buffer.
  simdjson::padded_string padded(body.data(), body.size());
  thread_local od::parser kept;  // its buffers, sized by the largest body so far, stay with the thread
  od::parser fresh;
  od::parser& parser = body.size() <= kKeptParserBytes ? kept : fresh;
  od::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) return NotJson();
  Walker walker(limits, padded.data() + padded.size() + simdjson::SIMDJSON_PADDING);
  RANKD_RETURN_IF_ERROR(walker.Root(doc, body));
  return walker.Take();
}

}  // namespace rankd
