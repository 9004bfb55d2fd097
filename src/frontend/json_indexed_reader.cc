// ReadJsonRequestIndexed: the request body read by simdjson's On-Demand parser into the same
// JsonRequestDocument the streaming reader builds (json_request_reader.h), with the same limits
// and the same messages. simdjson finds every structural character of the body in one vectorised
// pass, then the tree is walked once: the inputs' `data` and `parameters.lengths` straight into
// leaves, everything else (a few hundred bytes) into the small flat document (json_tree.h).
// Errors come back as codes, never as exceptions: a conversion that could throw does not compile.
#define SIMDJSON_EXCEPTIONS 0
#include <simdjson.h>

#include <algorithm>
#include <bit>
#include <string>

#include "frontend/json_request_reader.h"

namespace rankd {
namespace {

using Kind = JsonTree::Kind;
namespace od = simdjson::ondemand;

constexpr int kMaxDocumentDepth = 32;                   // outside `data`: objects and lists in lists
constexpr size_t kKeptParserBytes = size_t{256} << 10;  // a thread keeps its parser for bodies up to this

Status NotJson() { return InvalidArgument("the request body is not valid JSON"); }
Status NestsTooDeeply() { return InvalidArgument("the request body nests too deeply"); }

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

// A number as the streaming reader reads it: an int64, else a uint64, else a double (an integer
// past 64 bits too), as a leaf's kind and bits. `V`: a value or a document whose root is a number.
template <typename V>
Status Number(V& v, JsonLeaves::Kind& kind, uint64_t& bits) {
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
  Walker(const JsonReadLimits& limits, const char* padded_end, size_t body_bytes)
      : limits_(limits), padded_end_(padded_end) {
    // A header takes a node for about 16 of its bytes and text for half of them; tensor data in
    // the body takes neither, hence the caps.
    doc_.root.Reserve(std::min<size_t>(body_bytes / 16 + 16, 1024), std::min<size_t>(body_bytes / 2, 16384));
  }

  Status Root(od::document& doc) {
    od::json_type type;
    RANKD_JSON(doc.type().get(type));
    if (type != od::json_type::object) {
      // Not a request: the caller refuses any root but an object. Still read it whole, so that
      // a body that is not JSON at all says so.
      if (type != od::json_type::array) return ScalarDocument(doc, type);
      od::array a;
      RANKD_JSON(doc.get_array().get(a));
      const uint32_t list = tree().Open(Kind::kArray, {});
      RANKD_RETURN_IF_ERROR(Array(a, 1));
      tree().Close(list);
      return AtEnd(doc);
    }
    od::object root;
    RANKD_JSON(doc.get_object().get(root));
    const uint32_t object = tree().Open(Kind::kObject, {});
    RANKD_RETURN_IF_ERROR(ForEachField(root, [&](std::string_view key, od::value& v) -> Status {
      od::json_type t;
      RANKD_JSON(v.type().get(t));
      if (key != "inputs" || t != od::json_type::array) return Value(v, 2, key);
      od::array inputs;
      RANKD_JSON(v.get_array().get(inputs));
      return Inputs(inputs);
    }));
    tree().Close(object);
    return AtEnd(doc);
  }

  JsonRequestDocument Take() { return std::move(doc_); }

 private:
  JsonTree& tree() { return doc_.root; }

  // A body that is one number, string, bool or null.
  Status ScalarDocument(od::document& doc, od::json_type type) {
    RANKD_RETURN_IF_ERROR(AddScalar(doc, type, {}));
    return AtEnd(doc);
  }

  // A number, string, bool or null into the document. `V`: a value, or a document that is one.
  template <typename V>
  Status AddScalar(V& v, od::json_type t, std::string_view key) {
    switch (t) {
      case od::json_type::number: {
        JsonLeaves::Kind kind;
        uint64_t bits;
        RANKD_RETURN_IF_ERROR(Number(v, kind, bits));
        AddNumber(kind, bits, key);
        return Status::Ok();
      }
      case od::json_type::string: {
        std::string_view s;
        RANKD_JSON(v.get_string().get(s));
        tree().AddString(s, key);
        return Status::Ok();
      }
      case od::json_type::boolean: {
        bool b;
        RANKD_JSON(v.get_bool().get(b));
        tree().Add(Kind::kBool, b ? 1 : 0, key);
        return Status::Ok();
      }
      case od::json_type::null: {
        bool null = false;
        if (v.is_null().get(null) != simdjson::SUCCESS || !null) return NotJson();
        tree().Add(Kind::kNull, 0, key);
        return Status::Ok();
      }
      default:
        return NotJson();
    }
  }

  // A number into the document: a non-negative integer as unsigned, as the streaming reader has it.
  void AddNumber(JsonLeaves::Kind kind, uint64_t bits, std::string_view key) {
    if (kind == JsonLeaves::kFloat) {
      tree().Add(Kind::kFloat, bits, key);
    } else if (kind == JsonLeaves::kInt && static_cast<int64_t>(bits) < 0) {
      tree().Add(Kind::kInt, bits, key);
    } else {
      tree().Add(Kind::kUnsigned, bits, key);
    }
  }

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
    const uint32_t list = tree().Open(Kind::kArray, "inputs");
    size_t index = 0;
    RANKD_RETURN_IF_ERROR(ForEachElement(inputs, [&](od::value& v) -> Status {
      od::json_type t;
      RANKD_JSON(v.type().get(t));
      const size_t input_index = index++;
      if (t != od::json_type::object) return Value(v, 3, {});
      od::object input;
      RANKD_JSON(v.get_object().get(input));
      return Input(input, input_index);
    }));
    tree().Close(list);
    return Status::Ok();
  }

  Status Input(od::object& input, size_t index) {
    const uint32_t object = tree().Open(Kind::kObject, {});
    RANKD_RETURN_IF_ERROR(ForEachField(input, [&](std::string_view key, od::value& v) -> Status {
      if (key == "data") {
        doc_.data.emplace_back();
        tree().Add(Kind::kUnsigned, doc_.data.size() - 1, "data");
        return Leaves(v, object, index, doc_.data.back());
      }
      od::json_type t;
      RANKD_JSON(v.type().get(t));
      if (key != "parameters" || t != od::json_type::object) return Value(v, 4, key);
      od::object params;
      RANKD_JSON(v.get_object().get(params));
      return Parameters(params, object, index);
    }));
    tree().Close(object);
    return Status::Ok();
  }

  // An input's parameters: a `lengths` list into leaves, out of the document.
  Status Parameters(od::object& params, uint32_t input, size_t index) {
    const uint32_t object = tree().Open(Kind::kObject, "parameters");
    RANKD_RETURN_IF_ERROR(ForEachField(params, [&](std::string_view key, od::value& v) -> Status {
      od::json_type t;
      RANKD_JSON(v.type().get(t));
      if (key != "lengths" || t != od::json_type::array) return Value(v, 5, key);
      if (doc_.lengths_of_input.size() <= index) doc_.lengths_of_input.resize(index + 1, -1);
      doc_.lengths_of_input[index] = static_cast<int>(doc_.lengths.size());
      doc_.lengths.emplace_back();
      return Leaves(v, input, index, doc_.lengths.back());
    }));
    tree().Close(object);
    return Status::Ok();
  }

  // `data` (or a lengths list) of input `index`, whose document node (still open) is `input`.
  Status Leaves(od::value& v, uint32_t input, size_t index, JsonLeaves& leaves) {
    input_ = input;
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
        RANKD_RETURN_IF_ERROR(Check(v, 0));
        return Leaf(JsonLeaves::kOther, 0);
    }
  }

  // Reads a value through, keeping nothing: a body that is not JSON fails wherever it is. `depth`:
  // the containers open above it in what is read through. Bounded as the document is: a body of
  // some hundred kilobytes of brackets once recursed here until the thread's stack ran out.
  Status Check(od::value& v, int depth) {
    od::json_type t;
    RANKD_JSON(v.type().get(t));
    switch (t) {
      case od::json_type::object: {
        if (depth >= kMaxDocumentDepth) return NestsTooDeeply();
        od::object o;
        RANKD_JSON(v.get_object().get(o));
        return ForEachField(o, [&](std::string_view, od::value& child) { return Check(child, depth + 1); });
      }
      case od::json_type::array: {
        if (depth >= kMaxDocumentDepth) return NestsTooDeeply();
        od::array a;
        RANKD_JSON(v.get_array().get(a));
        return ForEachElement(a, [&](od::value& child) { return Check(child, depth + 1); });
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
    JsonValue name = doc_.root.at(input_)["name"];
    if (name.is_string()) return std::string(name.string());
    return "inputs[" + std::to_string(index_) + "]";
  }

  // Any value into the document, `depth` containers deep, as the member `key` of the open object
  // (empty in a list).
  Status Value(od::value& v, int depth, std::string_view key) {
    od::json_type t;
    RANKD_JSON(v.type().get(t));
    switch (t) {
      case od::json_type::object: {
        if (depth >= kMaxDocumentDepth) return NestsTooDeeply();
        od::object o;
        RANKD_JSON(v.get_object().get(o));
        const uint32_t object = tree().Open(Kind::kObject, key);
        RANKD_RETURN_IF_ERROR(ForEachField(
            o, [&](std::string_view child_key, od::value& child) { return Value(child, depth + 1, child_key); }));
        tree().Close(object);
        return Status::Ok();
      }
      case od::json_type::array: {
        if (depth >= kMaxDocumentDepth) return NestsTooDeeply();
        od::array a;
        RANKD_JSON(v.get_array().get(a));
        const uint32_t list = tree().Open(Kind::kArray, key);
        RANKD_RETURN_IF_ERROR(Array(a, depth + 1));
        tree().Close(list);
        return Status::Ok();
      }
      default:
        return AddScalar(v, t, key);
    }
  }

  Status Array(od::array& a, int depth) {
    return ForEachElement(a, [&](od::value& v) { return Value(v, depth, {}); });
  }

  const JsonReadLimits& limits_;
  const char* padded_end_;
  JsonRequestDocument doc_;
  uint32_t input_ = 0;            // the document node of the input whose data is being read
  size_t index_ = 0;              // its place in `inputs`
  JsonLeaves* leaves_ = nullptr;  // where its data goes
};

#undef RANKD_JSON

}  // namespace

StatusOr<JsonRequestDocument> ReadJsonRequestIndexed(std::string_view body, const JsonReadLimits& limits) {
  // simdjson reads up to 64 bytes past the end: the body is copied into a padded buffer, which a
  // thread keeps for small bodies as it keeps their parser.
  const bool small = body.size() <= kKeptParserBytes;
  thread_local std::vector<char> kept_buffer;
  std::vector<char> fresh_buffer;
  std::vector<char>& buffer = small ? kept_buffer : fresh_buffer;
  buffer.reserve(body.size() + simdjson::SIMDJSON_PADDING);
  buffer.assign(body.begin(), body.end());                  // copied once, not zeroed first
  buffer.resize(body.size() + simdjson::SIMDJSON_PADDING);  // the padding zeroed
  thread_local od::parser kept;  // its buffers, sized by the largest body so far, stay with the thread
  od::parser fresh;
  od::parser& parser = small ? kept : fresh;
  od::document doc;
  if (parser.iterate(buffer.data(), body.size(), buffer.size()).get(doc) != simdjson::SUCCESS) return NotJson();
  Walker walker(limits, buffer.data() + buffer.size(), body.size());
  RANKD_RETURN_IF_ERROR(walker.Root(doc));
  return walker.Take();
}

}  // namespace rankd
