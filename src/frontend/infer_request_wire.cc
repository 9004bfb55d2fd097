#include "frontend/infer_request_wire.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <utility>

#include "common/host_copies.h"

namespace rankd {
namespace {

// ModelInferRequest's field 7, `repeated bytes raw_input_contents` (grpc_service.proto).
constexpr uint64_t kRawInputContents = 7;
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
  size_t piece() const { return piece_; }
  size_t offset() const { return offset_; }
  uint64_t position() const { return position_; }

  bool Byte(uint8_t& b) {
    if (AtEnd()) return false;
    b = static_cast<uint8_t>(pieces_[piece_][offset_]);
    Advance(1);
    return true;
  }
  // A varint of at most `max_bytes` bytes.
  bool Varint(uint64_t& v, int max_bytes = 10) {
    v = 0;
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

}  // namespace

RawInputContents RawInputContents::Of(const inference::ModelInferRequest& proto) {
  RawInputContents raw;
  for (const std::string& entry : proto.raw_input_contents()) {
    raw.entries_.push_back(Entry{raw.pieces_.size(), 0, entry.size()});
    raw.pieces_.emplace_back(entry);
  }
  return raw;
}

void RawInputContents::CopyTo(int i, void* to) const {
  const Entry& e = entries_[static_cast<size_t>(i)];
  auto* out = static_cast<char*>(to);
  uint64_t left = e.bytes;
  CountHostCopy(HostCopy::kRequest, e.bytes);
  for (size_t p = e.piece, o = e.offset; left > 0; ++p, o = 0) {
    const size_t here = std::min<uint64_t>(left, pieces_[p].size() - o);
    std::memcpy(out, pieces_[p].data() + o, here);
    out += here;
    left -= here;
  }
}

std::string_view RawInputContents::View(int i, std::string& scratch) const {
  const Entry& e = entries_[static_cast<size_t>(i)];
  if (e.bytes == 0) return {};
  if (pieces_[e.piece].size() - e.offset >= e.bytes) return pieces_[e.piece].substr(e.offset, e.bytes);
  scratch.resize(e.bytes);
  CopyTo(i, scratch.data());
  return scratch;
}

StatusOr<inference::ModelInferRequest> ReadInferRequest(const std::vector<std::string_view>& pieces,
                                                        RawInputContents& raw) {
  raw.pieces_ = pieces;
  raw.entries_.clear();
  std::string rest;  // every field but raw_input_contents, as sent
  Cursor c(raw.pieces_);
  while (!c.AtEnd()) {
    const Cursor field_start = c;
    uint64_t field = 0, wire_type = 0, length = 0;
    if (!ReadTag(c, field, wire_type)) {
      return InvalidArgument("the request is not a ModelInferRequest: a malformed field tag at byte " +
                             std::to_string(field_start.position()));
    }
    if (field == kRawInputContents && wire_type == kLengthDelimited) {
      if (!ReadLength(c, length)) {
        return InvalidArgument("the request is not a ModelInferRequest: a malformed length at byte " +
                               std::to_string(field_start.position()));
      }
      const RawInputContents::Entry entry{c.piece(), c.offset(), length};
      if (!c.Skip(length)) {
        return InvalidArgument("the request is not a ModelInferRequest: raw_input_contents entry " +
                               std::to_string(raw.entries_.size()) + " runs past the end of the message");
      }
      raw.entries_.push_back(entry);
      continue;
    }
    if (!SkipValue(c, field, wire_type, 0)) {
      return InvalidArgument("the request is not a ModelInferRequest: field " + std::to_string(field) + " at byte " +
                             std::to_string(field_start.position()) + " is malformed or truncated");
    }
    c.AppendSince(field_start, rest);
  }
  inference::ModelInferRequest proto;
  if (!proto.ParseFromString(rest)) {
    return InvalidArgument(
        "the request is not a ModelInferRequest: its fields other than raw_input_contents "
        "do not parse");
  }
  return proto;
}

}  // namespace rankd
