#include "frontend/infer_request_wire.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <utility>

#include "common/host_copies.h"

namespace rankd {
namespace {

// Fields this reader takes out of a message (grpc_service.proto): ModelInferRequest's 5, `repeated
// InferInputTensor inputs`, and 7, `repeated bytes raw_input_contents`; InferInputTensor's 5,
// `InferTensorContents contents`; InferTensorContents' 8, `repeated bytes bytes_contents`.
constexpr uint64_t kInputs = 5, kRawInputContents = 7, kInputContents = 5, kBytesContents = 8;
// ModelInferRequest's 1, `string model_name`, and 2, `string model_version`.
constexpr uint64_t kModelName = 1, kModelVersion = 2;
// The fields counted against kMaxRequestParts: ModelInferRequest's 4, `parameters` (a map: an entry
// each), 5, 6, `outputs`, and 7; InferInputTensor's 4 and InferRequestedOutputTensor's 2, their
// `parameters`.
constexpr uint64_t kParameters = 4, kOutputs = 6, kInputParameters = 4, kOutputParameters = 2;
// Tensors, requested outputs, raw entries and parameters a request may hold in all. An empty input
// is two bytes on the wire and a parsed message of a few hundred: 16 M of them (32 MB) took a
// server to 5.5 GB and 30 s of CPU before this bound. No model has nearly as many inputs.
constexpr size_t kMaxRequestParts = 65536;
// Protobuf's wire types.
enum WireType : uint64_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5
};
// As deep as protobuf lets groups nest before it refuses a message.
constexpr int kMaxGroupDepth = 100;

// A position in the concatenation of the pieces, read forward.
class Cursor {
 public:
  explicit Cursor(const std::vector<std::string_view>& pieces) : pieces_(pieces) { SkipEmpty(); }

  bool AtEnd() const { return piece_ == pieces_.size(); }
  // The rest of the current piece (empty at the end).
  std::string_view Here() const { return AtEnd() ? std::string_view() : pieces_[piece_].substr(offset_); }
  size_t piece() const { return piece_; }
  size_t offset() const { return offset_; }
  uint64_t position() const { return position_; }

  bool Byte(uint8_t& b) {
    if (AtEnd()) return false;
    b = static_cast<uint8_t>(pieces_[piece_][offset_]);
    Advance(1);
    return true;
  }
  // A varint of at most `max_bytes` bytes (false: none, and the cursor is then anywhere).
  bool Varint(uint64_t& v, int max_bytes = 10) {
    v = 0;
    if (!AtEnd() && pieces_[piece_].size() - offset_ >= static_cast<size_t>(max_bytes)) {  // within this piece
      const auto* at = reinterpret_cast<const uint8_t*>(pieces_[piece_].data() + offset_);
      for (int i = 0; i < max_bytes; ++i) {
        v |= uint64_t{at[i] & 0x7fu} << (7 * i);
        if (!(at[i] & 0x80)) {
          Advance(static_cast<size_t>(i) + 1);
          return true;
        }
      }
      return false;
    }
    for (int i = 0; i < max_bytes; ++i) {
      uint8_t b = 0;
      if (!Byte(b)) return false;
      v |= uint64_t{b & 0x7fu} << (7 * i);
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  // Moves `n` bytes on; false (and at the end) when fewer are left.
  bool Skip(uint64_t n) {
    while (n > 0) {
      if (AtEnd()) return false;
      const size_t here = std::min<uint64_t>(n, pieces_[piece_].size() - offset_);
      Advance(here);
      n -= here;
    }
    return true;
  }
  // Appends the bytes from `from` (an earlier copy of this cursor) up to here.
  void AppendSince(const Cursor& from, std::string& out) const {
    size_t p = from.piece_, o = from.offset_;
    uint64_t left = position_ - from.position_;
    while (left > 0) {
      const size_t here = std::min<uint64_t>(left, pieces_[p].size() - o);
      out.append(pieces_[p].data() + o, here);
      left -= here;
      ++p;
      o = 0;
    }
  }

 private:
  void Advance(size_t n) {
    offset_ += n;
    position_ += n;
    if (offset_ == pieces_[piece_].size()) {
      ++piece_;
      offset_ = 0;
      SkipEmpty();
    }
  }
  void SkipEmpty() {
    while (piece_ < pieces_.size() && pieces_[piece_].empty()) ++piece_;
  }

  const std::vector<std::string_view>& pieces_;
  size_t piece_ = 0, offset_ = 0;
  uint64_t position_ = 0;
};

// A field's tag as protobuf reads one: at most 5 bytes, its value cut to 32 bits; false for one
// protobuf refuses (longer, field number 0, wire type 6 or 7).
bool ReadTag(Cursor& c, uint64_t& field, uint64_t& wire_type) {
  uint64_t tag = 0;
  if (!c.Varint(tag, 5)) return false;
  tag = static_cast<uint32_t>(tag);
  field = tag >> 3;
  wire_type = tag & 7;
  return field != 0 && wire_type <= kFixed32;
}

// A length-delimited field's length as protobuf reads one: at most 5 bytes and INT_MAX.
bool ReadLength(Cursor& c, uint64_t& n) { return c.Varint(n, 5) && n <= static_cast<uint64_t>(INT_MAX); }

// Skips the value of a field of `wire_type` whose tag was just read; groups are skipped through
// their end tag. False for a malformed or truncated value.
bool SkipValue(Cursor& c, uint64_t field, uint64_t wire_type, int depth) {
  uint64_t v = 0;
  switch (wire_type) {
    case kVarint:
      return c.Varint(v);
    case kFixed64:
      return c.Skip(8);
    case kFixed32:
      return c.Skip(4);
    case kLengthDelimited:
      return ReadLength(c, v) && c.Skip(v);
    case kStartGroup:
      if (depth >= kMaxGroupDepth) return false;
      for (;;) {
        uint64_t inner = 0, inner_type = 0;
        if (!ReadTag(c, inner, inner_type)) return false;
        if (inner_type == kEndGroup) return inner == field;
        if (!SkipValue(c, inner, inner_type, depth + 1)) return false;
      }
    default:  // an end-group tag with no group open
      return false;
  }
}

void AppendVarint(uint64_t v, std::string& out) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

using Span = WireContents::Span;

// Reads the fields of a message nested in the one read (an InferInputTensor, an
// InferTensorContents) up to byte `end` of the pieces, as `field_of(field)` says of each
// length-delimited field: kTaken, left where it lies (appended to `taken`, unless null); kNested, one
// whose value `nested` reads up to its own end, its fields left out re-encoded into its place;
// kCopied, like every field of another wire type, appended to `rest` as it was sent (unless null). Before each
// field `run(c, end, taken)` may take a run of taken fields at once (true when it took any). False
// for a malformed field or one running past `end`.
enum class Treatment { kTaken, kNested, kCopied };
template <typename FieldOf, typename Nested, typename Run>
bool ReadFields(Cursor& c, uint64_t end, FieldOf field_of, Nested nested, Run run, std::vector<Span>* taken,
                std::string* rest) {
  while (c.position() < end) {
    if (run(c, end, taken)) continue;
    const Cursor field_start = c;
    uint64_t field = 0, wire_type = 0, length = 0;
    if (!ReadTag(c, field, wire_type)) return false;
    const Treatment treatment = wire_type == kLengthDelimited ? field_of(field) : Treatment::kCopied;
    if (treatment == Treatment::kCopied) {
      if (!SkipValue(c, field, wire_type, 0) || c.position() > end) return false;
      if (rest) c.AppendSince(field_start, *rest);
      continue;
    }
    if (!ReadLength(c, length) || c.position() + length > end) return false;
    if (treatment == Treatment::kTaken) {
      const Span found{c.piece(), c.offset(), length};
      if (!c.Skip(length)) return false;
      if (taken) taken->push_back(found);
      continue;
    }
    std::string inner;
    if (!nested(c, c.position() + length, taken, rest ? &inner : nullptr)) return false;
    if (rest) {
      AppendVarint(field << 3 | kLengthDelimited, *rest);
      AppendVarint(inner.size(), *rest);
      rest->append(inner);
    }
  }
  return true;
}

// The bytes_contents strings from the cursor on that lie in its piece, each behind its one-byte
// tag, read straight from the piece (W4s at 512 candidates: 3,072 strings of 5-12 bytes, where the
// cursor's field by field took about 60 ns a string); true when it took any. A string it cannot
// take (another tag, a length past the piece or malformed) is left to ReadFields.
bool TakeStringRun(Cursor& c, uint64_t end, std::vector<Span>* strings) {
  constexpr auto kTag = static_cast<uint8_t>(kBytesContents << 3 | kLengthDelimited);
  const std::string_view here = c.Here();
  const auto* at = reinterpret_cast<const uint8_t*>(here.data());
  const size_t limit = std::min<uint64_t>(here.size(), end - c.position());
  size_t done = 0;
  while (done < limit && at[done] == kTag) {
    size_t k = done + 1;
    uint64_t length = 0;
    bool read = false;
    for (int shift = 0; shift < 35 && k < limit; shift += 7) {  // as ReadLength: at most 5 bytes
      const uint8_t b = at[k++];
      length |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) {
        read = true;
        break;
      }
    }
    if (!read || length > static_cast<uint64_t>(INT_MAX) || length > limit - k) break;
    if (strings) strings->push_back({c.piece(), c.offset() + k, length});
    done = k + length;
  }
  if (done == 0) return false;
  c.Skip(done);
  return true;
}

// An InferTensorContents' fields: its bytes_contents taken.
bool ReadContents(Cursor& c, uint64_t end, std::vector<Span>* strings, std::string* rest) {
  auto field_of = [](uint64_t field) { return field == kBytesContents ? Treatment::kTaken : Treatment::kCopied; };
  auto none = [](Cursor&, uint64_t, std::vector<Span>*, std::string*) { return false; };
  return ReadFields(c, end, field_of, none, TakeStringRun, strings, rest);
}

// An InferInputTensor's fields: its contents' bytes_contents taken; its parameters counted in `parts`.
bool ReadInput(Cursor& c, uint64_t end, std::vector<Span>* strings, std::string* rest, size_t& parts) {
  auto field_of = [&parts](uint64_t field) {
    if (field == kInputParameters) ++parts;
    return field == kInputContents ? Treatment::kNested : Treatment::kCopied;
  };
  auto no_runs = [](Cursor&, uint64_t, std::vector<Span>*) { return false; };
  return ReadFields(c, end, field_of, ReadContents, no_runs, strings, rest);
}

Status TooManyParts() {
  return InvalidArgument("the request holds more than " + std::to_string(kMaxRequestParts) +
                         " inputs, outputs, raw contents and parameters");
}

// An InferRequestedOutputTensor's fields, read through: its parameters counted in `parts`.
bool CountOutput(Cursor& c, uint64_t end, size_t& parts) {
  auto field_of = [&parts](uint64_t field) {
    if (field == kOutputParameters) ++parts;
    return Treatment::kCopied;
  };
  auto none = [](Cursor&, uint64_t, std::vector<Span>*, std::string*) { return false; };
  auto no_runs = [](Cursor&, uint64_t, std::vector<Span>*) { return false; };
  return ReadFields(c, end, field_of, none, no_runs, nullptr, nullptr);
}

}  // namespace

WireContents WireContents::Of(const inference::ModelInferRequest& proto) {
  WireContents wire;
  for (const std::string& entry : proto.raw_input_contents()) {
    wire.entries_.push_back(Span{wire.pieces_.size(), 0, entry.size()});
    wire.pieces_.emplace_back(entry);
  }
  for (int i = 0; i < proto.inputs_size(); ++i) {
    const auto& strings = proto.inputs(i).contents().bytes_contents();
    if (strings.empty()) continue;
    wire.strings_.resize(static_cast<size_t>(i) + 1);
    for (const std::string& s : strings) {
      wire.strings_[static_cast<size_t>(i)].push_back(Span{wire.pieces_.size(), 0, s.size()});
      wire.pieces_.emplace_back(s);
    }
  }
  return wire;
}

void WireContents::Copy(const Span& s, char* to) const {
  uint64_t left = s.bytes;
  for (size_t p = s.piece, o = s.offset; left > 0; ++p, o = 0) {
    const size_t here = std::min<uint64_t>(left, pieces_[p].size() - o);
    std::memcpy(to, pieces_[p].data() + o, here);
    to += here;
    left -= here;
  }
}

std::string_view WireContents::View(const Span& s, std::string& scratch) const {
  if (s.bytes == 0) return {};
  if (pieces_[s.piece].size() - s.offset >= s.bytes) return pieces_[s.piece].substr(s.offset, s.bytes);
  scratch.resize(s.bytes);
  Copy(s, scratch.data());
  return scratch;
}

void WireContents::CopyTo(int i, void* to) const {
  const Span& s = entries_[static_cast<size_t>(i)];
  CountHostCopy(HostCopy::kRequest, s.bytes);
  Copy(s, static_cast<char*>(to));
}

std::string_view WireContents::View(int i, std::string& scratch) const {
  return View(entries_[static_cast<size_t>(i)], scratch);
}

int64_t WireContents::string_count(int input) const {
  const auto i = static_cast<size_t>(input);
  return i < strings_.size() ? static_cast<int64_t>(strings_[i].size()) : 0;
}

void WireContents::AppendStrings(int input, PackedStrings& to) const {
  const auto i = static_cast<size_t>(input);
  if (i >= strings_.size() || strings_[i].empty()) return;  // none: offsets stay empty, as Append leaves them
  uint64_t total = 0;
  for (const Span& s : strings_[i]) total += s.bytes;
  CountHostCopy(HostCopy::kRequest, total);
  to.Reserve(strings_[i].size(), total);
  for (const Span& s : strings_[i]) {
    if (s.bytes == 0) {
      // nothing to copy (an empty string may end the message: no piece holds it)
    } else if (pieces_[s.piece].size() - s.offset >= s.bytes) {  // in one piece
      to.bytes.append(pieces_[s.piece].data() + s.offset, s.bytes);
    } else {
      const size_t at = to.bytes.size();
      to.bytes.resize(at + s.bytes);
      Copy(s, to.bytes.data() + at);
    }
    to.EndString();
  }
}

void WireContents::PutBack(inference::ModelInferRequest& proto) const {
  std::string scratch;
  for (const Span& s : entries_) proto.add_raw_input_contents(std::string(View(s, scratch)));
  for (size_t i = 0; i < strings_.size() && static_cast<int>(i) < proto.inputs_size(); ++i) {
    for (const Span& s : strings_[i]) {
      proto.mutable_inputs(static_cast<int>(i))->mutable_contents()->add_bytes_contents(std::string(View(s, scratch)));
    }
  }
}

StatusOr<inference::ModelInferRequest> ReadInferRequest(const std::vector<std::string_view>& pieces,
                                                        WireContents& wire) {
  inference::ModelInferRequest proto;
  RANKD_RETURN_IF_ERROR(ReadInferRequestInto(pieces, wire, proto));
  return proto;
}

Status ReadInferRequestInto(const std::vector<std::string_view>& pieces, WireContents& wire,
                            inference::ModelInferRequest& proto) {
  wire.pieces_ = pieces;
  wire.entries_.clear();
  wire.strings_.clear();
  proto.Clear();
  // Every field but raw_input_contents and bytes_contents, as sent: this thread's buffer, kept from
  // one request to the next unless a request made it larger than a megabyte (typed contents).
  thread_local std::string kept;
  std::string& rest = kept;
  rest.clear();
  struct Release {
    std::string& s;
    ~Release() {
      if (s.capacity() > (1 << 20)) std::string().swap(s);
    }
  } release{rest};
  Cursor c(wire.pieces_);
  size_t inputs = 0, parts = 0;
  std::vector<Span> strings;  // an input's
  std::string input;          // an input's fields but its strings
  // Checked before each field and before protobuf parses (an input's or output's own parameters
  // are counted as it is read): no more than one field past the bound is ever scanned.
  while (!c.AtEnd()) {
    if (parts > kMaxRequestParts) return TooManyParts();
    const Cursor field_start = c;
    uint64_t field = 0, wire_type = 0, length = 0;
    if (!ReadTag(c, field, wire_type)) {
      return InvalidArgument("the request is not a ModelInferRequest: a malformed field tag at byte " +
                             std::to_string(field_start.position()));
    }
    const bool delimited = wire_type == kLengthDelimited;
    if (delimited && (field == kRawInputContents || field == kInputs || field == kOutputs || field == kParameters)) {
      ++parts;
    }
    if (delimited && (field == kRawInputContents || field == kInputs || field == kOutputs) && !ReadLength(c, length)) {
      return InvalidArgument("the request is not a ModelInferRequest: a malformed length at byte " +
                             std::to_string(field_start.position()));
    }
    if (delimited && field == kOutputs) {
      const uint64_t end = c.position() + length;
      if (!CountOutput(c, end, parts) || c.position() != end) {
        return InvalidArgument("the request is not a ModelInferRequest: output at byte " +
                               std::to_string(field_start.position()) + " is malformed or truncated");
      }
      c.AppendSince(field_start, rest);
      continue;
    }
    if (delimited && field == kRawInputContents) {
      const WireContents::Span entry{c.piece(), c.offset(), length};
      if (!c.Skip(length)) {
        return InvalidArgument("the request is not a ModelInferRequest: raw_input_contents entry " +
                               std::to_string(wire.entries_.size()) + " runs past the end of the message");
      }
      wire.entries_.push_back(entry);
      continue;
    }
    if (delimited && field == kInputs) {
      // Its fields but its strings, re-encoded; with no strings (every input but a typed BYTES
      // one), the input as sent.
      const uint64_t end = c.position() + length;
      strings.clear();
      input.clear();
      if (!ReadInput(c, end, &strings, &input, parts) || c.position() != end) {
        return InvalidArgument("the request is not a ModelInferRequest: input " + std::to_string(inputs) + " at byte " +
                               std::to_string(field_start.position()) + " is malformed or truncated");
      }
      if (strings.empty()) {
        c.AppendSince(field_start, rest);
      } else {
        AppendVarint(kInputs << 3 | kLengthDelimited, rest);
        AppendVarint(input.size(), rest);
        rest.append(input);
        wire.strings_.resize(inputs + 1);
        wire.strings_[inputs].swap(strings);
      }
      ++inputs;
      continue;
    }
    if (!SkipValue(c, field, wire_type, 0)) {
      return InvalidArgument("the request is not a ModelInferRequest: field " + std::to_string(field) + " at byte " +
                             std::to_string(field_start.position()) + " is malformed or truncated");
    }
    c.AppendSince(field_start, rest);
  }
  if (parts > kMaxRequestParts) return TooManyParts();
  if (!proto.ParseFromString(rest)) {
    return InvalidArgument(
        "the request is not a ModelInferRequest: its fields other than raw_input_contents and bytes_contents "
        "do not parse");
  }
  return Status::Ok();
}

std::optional<NamedModel> PeekNamedModel(std::string_view head) {
  size_t at = 0;
  // A varint of at most 5 bytes (a tag or a length as protobuf reads them); false past `head`.
  auto varint = [&](uint64_t& v) {
    v = 0;
    for (int i = 0; i < 5 && at < head.size(); ++i) {
      const auto b = static_cast<uint8_t>(head[at++]);
      v |= uint64_t{b & 0x7fu} << (7 * i);
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  NamedModel named;
  bool found = false;
  while (at < head.size()) {
    uint64_t tag = 0, length = 0;
    if (!varint(tag)) return std::nullopt;
    const uint64_t field = static_cast<uint32_t>(tag) >> 3;
    if ((tag & 7) != kLengthDelimited || (field != kModelName && field != kModelVersion)) break;
    if (!varint(length) || length > head.size() - at) return std::nullopt;
    (field == kModelName ? named.name : named.version) = head.substr(at, length);
    found = found || field == kModelName;
    at += length;
  }
  if (!found) return std::nullopt;
  return named;
}

}  // namespace rankd
