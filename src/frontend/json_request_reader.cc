#include "frontend/json_request_reader.h"

#include <bit>

namespace rankd {
namespace {

using nlohmann::json;

constexpr size_t kMaxDocumentDepth = 32;  // outside `data`: objects and lists in lists

// The SAX handler: builds the small document and streams each input's data into leaves.
class Reader {
 public:
  explicit Reader(const JsonReadLimits& limits) : limits_(limits) {}

  bool null() { return Value(json(nullptr), JsonLeaves::kOther, 0); }
  bool boolean(bool v) { return Value(json(v), JsonLeaves::kBool, v ? 1 : 0); }
  bool number_integer(int64_t v) { return Value(json(v), JsonLeaves::kInt, static_cast<uint64_t>(v)); }
  bool number_unsigned(uint64_t v) {
    return Value(json(v), v > static_cast<uint64_t>(INT64_MAX) ? JsonLeaves::kUnsigned : JsonLeaves::kInt, v);
  }
  bool number_float(double v, const std::string&) {
    return Value(json(v), JsonLeaves::kFloat, std::bit_cast<uint64_t>(v));
  }
  bool string(std::string& v) {
    if (skip_ == 0 && (leaves_ != nullptr || AtInputData())) return Value(json(), JsonLeaves::kString, 0, v);
    return Value(json(std::move(v)), JsonLeaves::kOther, 0);
  }
  bool binary(json::binary_t&) { return Value(json(nullptr), JsonLeaves::kOther, 0); }

  bool key(std::string& k) {
    if (skip_ == 0 && leaves_ == nullptr) key_ = std::move(k);
    return true;
  }

  bool start_object(size_t) {
    if (skip_ > 0 || leaves_ != nullptr) {  // an object inside data: one leaf that is not a value
      if (skip_ == 0 && !(Child() && Leaf(JsonLeaves::kOther, 0))) return false;
      ++skip_;
      return true;
    }
    if (AtInputData()) {  // data given as an object: one leaf, skipped
      StartLeaves();
      bool ok = Leaf(JsonLeaves::kOther, 0);
      leaves_ = nullptr;
      ++skip_;
      return ok;
    }
    return Open(json::object());
  }

  bool end_object() {
    if (skip_ > 0) {
      --skip_;
      return true;
    }
    stack_.pop_back();
    return true;
  }

  bool start_array(size_t) {
    if (skip_ > 0) {
      ++skip_;
      return true;
    }
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
    bool inputs = stack_.size() == 1 && stack_[0]->is_object() && key_ == "inputs";
    if (!Open(json::array())) return false;
    if (inputs) inputs_ = stack_.back();
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
    stack_.pop_back();
    return true;
  }

  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception&) {
    if (error_.ok()) error_ = InvalidArgument("the request body is not valid JSON");
    return false;
  }

  Status error() const { return error_; }
  JsonRequestDocument Take() { return std::move(doc_); }

 private:
  // A scalar: a leaf inside data, or a value of the document.
  bool Value(json v, JsonLeaves::Kind kind, uint64_t bits, std::string_view text = {}) {
    if (skip_ > 0) return true;
    if (leaves_ != nullptr) return Child() && Leaf(kind, bits, text);
    if (AtInputData()) {  // data given as one scalar
      StartLeaves();
      bool ok = Leaf(kind, bits, text);
      leaves_ = nullptr;
      return ok;
    }
    Put(std::move(v));
    return true;
  }

  // Whether the next value is `data` of an object in the top-level `inputs` list.
  bool AtInputData() const {
    return stack_.size() == 3 && stack_[1] == inputs_ && stack_[2]->is_object() && key_ == "data";
  }

  // Whether the next value is `parameters.lengths` of an input.
  bool AtInputLengths() const {
    if (stack_.size() != 4 || stack_[1] != inputs_ || key_ != "lengths") return false;
    auto parameters = stack_[2]->find("parameters");
    return parameters != stack_[2]->end() && &*parameters == stack_[3];
  }

  // A list of lengths of the current input starts: its leaves, out of the document.
  void StartLengths() {
    size_t input = inputs_->size() - 1;
    if (doc_.lengths_of_input.size() <= input) doc_.lengths_of_input.resize(input + 1, -1);
    doc_.lengths_of_input[input] = static_cast<int>(doc_.lengths.size());
    doc_.lengths.emplace_back();
    leaves_ = &doc_.lengths.back();
  }

  // `data` of the current input starts: its leaves, and the index the document holds for them.
  void StartLeaves() {
    (*stack_[2])["data"] = doc_.data.size();
    doc_.data.emplace_back();
    leaves_ = &doc_.data.back();
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
    auto name = stack_[2]->find("name");
    if (name != stack_[2]->end() && name->is_string()) return name->get<std::string>();
    return "inputs[" + std::to_string(inputs_->size() - 1) + "]";
  }

  void Put(json v) {
    if (stack_.empty()) {
      doc_.root = std::move(v);
    } else if (stack_.back()->is_array()) {
      stack_.back()->push_back(std::move(v));
    } else {
      (*stack_.back())[key_] = std::move(v);
    }
  }

  bool Open(json container) {
    if (stack_.size() >= kMaxDocumentDepth) {
      error_ = InvalidArgument("the request body nests too deeply");
      return false;
    }
    Put(std::move(container));
    json* opened = stack_.empty()              ? &doc_.root
                   : stack_.back()->is_array() ? &stack_.back()->back()
                                               : &(*stack_.back())[key_];
    stack_.push_back(opened);
    return true;
  }

  const JsonReadLimits& limits_;
  JsonRequestDocument doc_;
  std::vector<json*> stack_;      // the document's open containers
  std::string key_;               // the last key read in the document
  json* inputs_ = nullptr;        // the top-level `inputs` list
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
