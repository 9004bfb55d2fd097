#include "frontend/json_request_reader.h"

#include <bit>

#include <nlohmann/json.hpp>

namespace rankd {
namespace {

using nlohmann::json;
using Kind = JsonTree::Kind;

constexpr size_t kMaxDocumentDepth = 32;  // outside `data`: objects and lists in lists

// The SAX handler: builds the small document and streams each input's data into leaves.
class Reader {
 public:
  explicit Reader(const JsonReadLimits& limits) : limits_(limits) { doc_.root.Reserve(256, 4096); }

  bool null() { return Value(Kind::kNull, JsonLeaves::kOther, 0); }
  bool boolean(bool v) { return Value(Kind::kBool, JsonLeaves::kBool, v ? 1 : 0); }
  bool number_integer(int64_t v) {  // "-0" too: a non-negative value is unsigned in the document
    return Value(v < 0 ? Kind::kInt : Kind::kUnsigned, JsonLeaves::kInt, static_cast<uint64_t>(v));
  }
  bool number_unsigned(uint64_t v) {
    return Value(Kind::kUnsigned, v > static_cast<uint64_t>(INT64_MAX) ? JsonLeaves::kUnsigned : JsonLeaves::kInt, v);
  }
  bool number_float(double v, const std::string&) {
    return Value(Kind::kFloat, JsonLeaves::kFloat, std::bit_cast<uint64_t>(v));
  }
  bool string(std::string& v) {
    if (skip_ == 0 && (leaves_ != nullptr || AtInputData())) return Value(Kind::kString, JsonLeaves::kString, 0, v);
    return Value(Kind::kString, JsonLeaves::kOther, 0, v);
  }
  bool binary(json::binary_t&) { return Value(Kind::kNull, JsonLeaves::kOther, 0); }

  bool key(std::string& k) {
    if (skip_ == 0 && leaves_ == nullptr) key_ = std::move(k);
    return true;
  }

  bool start_object(size_t) {
    if (skip_ > 0 || leaves_ != nullptr) {  // an object inside data: one leaf that is not a value
      if (skip_ == 0 && !(Child() && Leaf(JsonLeaves::kOther, 0))) return false;
      return Skip();
    }
    if (AtInputData()) {  // data given as an object: one leaf, skipped
      StartLeaves();
      bool ok = Leaf(JsonLeaves::kOther, 0);
      leaves_ = nullptr;
      return Skip() && ok;
    }
    return Open(Kind::kObject);
  }

  bool end_object() {
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    Close();
    return true;
  }

  bool start_array(size_t) {
    if (skip_ > 0) return Skip();
    if (leaves_ != nullptr) {
      if (!Child()) return false;
      counts_.push_back(0);
      return true;
    }
    if (AtInputData()) {
      StartLeaves();
      counts_.assign(1, 0);
      return true;
    }
    if (AtInputLengths()) {
      StartLengths();
      counts_.assign(1, 0);
      return true;
    }
    bool inputs = stack_.size() == 1 && doc_.root.at(stack_[0]).is_object() && key_ == "inputs";
    if (!Open(Kind::kArray)) return false;
    if (inputs) {
      inputs_ = stack_.back();
      inputs_seen_ = 0;
    }
    return true;
  }

  bool end_array() {
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    if (leaves_ != nullptr) {
      if (counts_.size() == 2) leaves_->row_lengths.push_back(counts_.back());
      counts_.pop_back();
      if (counts_.empty()) leaves_ = nullptr;
      return true;
    }
    Close();
    return true;
  }

  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception&) {
    if (error_.ok()) error_ = InvalidArgument("the request body is not valid JSON");
    return false;
  }

  Status error() const { return error_; }
  JsonRequestDocument Take() { return std::move(doc_); }

 private:
  // A scalar: a leaf inside data (`kind`, `bits`, `text`), or a value of the document (`scalar`).
  bool Value(Kind scalar, JsonLeaves::Kind kind, uint64_t bits, std::string_view text = {}) {
    if (skip_ > 0) return true;
    if (leaves_ != nullptr) return Child() && Leaf(kind, bits, text);
    if (AtInputData()) {  // data given as one scalar
      StartLeaves();
      bool ok = Leaf(kind, bits, text);
      leaves_ = nullptr;
      return ok;
    }
    Put(scalar, bits, text);
    return true;
  }

  // Whether the next value is `data` of an object in the top-level `inputs` list.
  bool AtInputData() const {
    return stack_.size() == 3 && stack_[1] == inputs_ && doc_.root.at(stack_[2]).is_object() && key_ == "data";
  }

  // Whether the next value is `parameters.lengths` of an input.
  bool AtInputLengths() const {
    // stack_[3] is the input's open member `parameters`, the last of that name so far.
    return stack_.size() == 4 && stack_[1] == inputs_ && key_ == "lengths" && doc_.root.at(stack_[2]).is_object() &&
           doc_.root.at(stack_[3]).key() == "parameters";
  }

  // A list of lengths of the current input starts: its leaves, out of the document.
  void StartLengths() {
    size_t input = inputs_seen_ - 1;
    if (doc_.lengths_of_input.size() <= input) doc_.lengths_of_input.resize(input + 1, -1);
    doc_.lengths_of_input[input] = static_cast<int>(doc_.lengths.size());
    doc_.lengths.emplace_back();
    leaves_ = &doc_.lengths.back();
  }

  // `data` of the current input starts: its leaves, and the index the document holds for them.
  void StartLeaves() {
    doc_.root.Add(Kind::kUnsigned, doc_.data.size(), "data");
    doc_.data.emplace_back();
    leaves_ = &doc_.data.back();
  }

  // One more container open in what is skipped, bounded as the document is (the other reader reads
  // them through, json_indexed_reader.cc, and answers the same).
  bool Skip() {
    if (skip_ >= static_cast<int>(kMaxDocumentDepth)) {
      error_ = InvalidArgument("the request body nests too deeply");
      return false;
    }
    ++skip_;
    return true;
  }

  // A value or list directly inside the list at depth counts_.size() - 1 of data.
  bool Child() {
    if (static_cast<int>(counts_.size()) > limits_.max_depth) {
      error_ = InvalidArgument("input '" + InputName() + "': data is nested too deeply");
      return false;
    }
    ++counts_.back();
    return true;
  }

  // A leaf; a string's text is kept in the leaves' strings, its index the leaf's value.
  bool Leaf(JsonLeaves::Kind kind, uint64_t bits, std::string_view text = {}) {
    if (static_cast<int64_t>(leaves_->kinds.size()) >= limits_.max_elements) {
      error_ = ResourceExhausted("input '" + InputName() + "' has more than " + std::to_string(limits_.max_elements) +
                                 " elements");
      return false;
    }
    if (kind == JsonLeaves::kString) {
      bits = static_cast<uint64_t>(leaves_->strings.size());
      leaves_->strings.Append(text);
    }
    leaves_->kinds.push_back(kind);
    leaves_->values.push_back(bits);
    return true;
  }

  std::string InputName() const {
    JsonValue name = doc_.root.at(stack_[2])["name"];
    if (name.is_string()) return std::string(name.string());
    return "inputs[" + std::to_string(inputs_seen_ - 1) + "]";
  }

  // The key the next value has in the open container: key_ in an object, none in a list.
  std::string_view NextKey() {
    if (stack_.empty()) return {};
    if (stack_.back() == inputs_) ++inputs_seen_;
    return doc_.root.at(stack_.back()).is_array() ? std::string_view() : std::string_view(key_);
  }

  void Put(Kind scalar, uint64_t bits, std::string_view text) {
    std::string_view key = NextKey();
    if (scalar == Kind::kString) {
      doc_.root.AddString(text, key);
    } else {
      doc_.root.Add(scalar, bits, key);
    }
  }

  bool Open(Kind container) {
    if (stack_.size() >= kMaxDocumentDepth) {
      error_ = InvalidArgument("the request body nests too deeply");
      return false;
    }
    std::string_view key = NextKey();
    stack_.push_back(doc_.root.Open(container, key));
    return true;
  }

  void Close() {
    doc_.root.Close(stack_.back());
    stack_.pop_back();
  }

  static constexpr uint32_t kNone = UINT32_MAX;
  const JsonReadLimits& limits_;
  JsonRequestDocument doc_;
  std::vector<uint32_t> stack_;   // the document's open containers
  std::string key_;               // the last key read in the document
  uint32_t inputs_ = kNone;       // the top-level `inputs` list
  size_t inputs_seen_ = 0;        // values in it so far
  JsonLeaves* leaves_ = nullptr;  // the data being read, or nullptr
  std::vector<int64_t> counts_;   // in data: children so far of each open list
  int skip_ = 0;                  // depth inside an object within data (not read)
  Status error_;
};

}  // namespace

double JsonLeaves::AsDouble(size_t i) const {
  switch (kinds[i]) {
    case kInt:
      return static_cast<double>(static_cast<int64_t>(values[i]));
    case kUnsigned:
      return static_cast<double>(values[i]);
    default:
      return std::bit_cast<double>(values[i]);
  }
}

StatusOr<JsonRequestDocument> ReadJsonRequest(std::string_view body, const JsonReadLimits& limits) {
  constexpr size_t kIndexedBodyBytes = size_t{8} << 20;
  return body.size() <= kIndexedBodyBytes ? ReadJsonRequestIndexed(body, limits)
                                          : ReadJsonRequestStreaming(body, limits);
}

StatusOr<JsonRequestDocument> ReadJsonRequestStreaming(std::string_view body, const JsonReadLimits& limits) {
  Reader reader(limits);
  bool ok = json::sax_parse(body.begin(), body.end(), &reader);
  if (!reader.error().ok()) return reader.error();
  if (!ok) return InvalidArgument("the request body is not valid JSON");
  return reader.Take();
}

}  // namespace rankd
