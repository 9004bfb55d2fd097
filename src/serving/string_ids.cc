#include "serving/string_ids.h"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/string_hash.h"
#include "model/ops/hash_strings.h"
#include "serving/delimited_ids.h"

namespace rankd {
namespace {

std::string Quoted(std::string_view s) {
  constexpr size_t kShown = 40;
  std::string out = "'";
  for (char c : s.substr(0, kShown)) out += c >= 0x20 && c < 0x7f ? c : '?';
  return out + (s.size() > kShown ? "...'" : "'");
}

// One string checked against the config: its length, and UTF-8 where asked.
Status CheckString(const InputConfig& config, std::string_view s, int64_t element) {
  if (static_cast<int64_t>(s.size()) > config.strings.max_bytes) {
    return InvalidArgument("input '" + config.name + "': element " + std::to_string(element) + " is " +
                           std::to_string(s.size()) + " bytes; the limit is " +
                           std::to_string(config.strings.max_bytes) + " (max_string_bytes)");
  }
  if (config.strings.utf8 && !simdjson::validate_utf8(s.data(), s.size())) {
    return InvalidArgument("input '" + config.name + "': element " + std::to_string(element) + " is not valid UTF-8");
  }
  return Status::Ok();
}

// The ids of a split input's pieces parsed one by one, in order (the way that names a mistake).
template <typename Id>
class IdWriter {
 public:
  explicit IdWriter(const InputConfig& config) : config_(config) {}

  // Appends the id of a piece; an error for a piece that is not an id.
  Status Put(std::string_view s, int64_t element) {
    int64_t id = 0;
    if (!ParseDecimalId(s, id) || id < std::numeric_limits<Id>::min() || id > std::numeric_limits<Id>::max()) {
      return InvalidArgument("input '" + config_.name + "': element " + std::to_string(element) + " has " +
                             (s.empty() ? "an empty piece" : "the piece " + Quoted(s)) + " where an " +
                             DTypeName(config_.dtype) + " id belongs");
    }
    ids_.push_back(static_cast<Id>(id));
    return Status::Ok();
  }

  // The ids as a flat tensor of the input's type.
  Tensor Take() const {
    Tensor t = Tensor::Empty(config_.dtype, {static_cast<int64_t>(ids_.size())});
    std::copy(ids_.begin(), ids_.end(), t.data<Id>());
    return t;
  }

  size_t count() const { return ids_.size(); }

 private:
  const InputConfig& config_;
  std::vector<Id> ids_;
};

// The common case of split ids, decimal ids between a single-byte delimiter ("123,456,789", spaces
// around a piece allowed; serving/delimited_ids.h), each row's pieces counted first and their ids
// written in place. W2's histories so (two rows of up to 1,000 ids) cost an H100 host 16-20 µs a
// request read a byte at a time, 9-10 µs so (docs/strings.md, "Cost"). Any other piece (empty,
// not a number, outside the input's type) makes it give up, false, and the
// general way then reads the input again and names the mistake. Rows are checked against the
// config's limits first, as the general way checks them.
template <typename Id>
bool ParseSplitIds(const InputConfig& config, const PackedStrings& s, char delimiter, InferInput& out) {
  int64_t total = 0;
  for (int64_t r = 0; r < s.size(); ++r) {
    const std::string_view text = s.at(r);
    if (!CheckString(config, text, r).ok()) return false;
    out.lengths.push_back(CountPieces(text, delimiter));
    total += out.lengths.back();
  }
  out.data = Tensor::Empty(config.dtype, {total});
  Id* ids = out.data.data<Id>();
  for (int64_t r = 0; r < s.size(); ++r) {
    if (!ParseDelimitedIds(s.bytes, s.at(r), delimiter, ids)) return false;
    ids += out.lengths[static_cast<size_t>(r)];
  }
  return true;
}

// Split then hashed: each row's pieces found and hashed in one pass, empty ones included (a
// trailing delimiter ends with one). An error names a row past the config's limits.
template <typename Id>
Status HashSplitPieces(const InputConfig& config, const PackedStrings& s, std::string_view delimiter,
                       std::vector<Id>& ids, std::vector<int64_t>& lengths) {
  const InputConfig::Strings& c = config.strings;
  for (int64_t r = 0; r < s.size(); ++r) {
    const std::string_view text = s.at(r);
    RANKD_RETURN_IF_ERROR(CheckString(config, text, r));
    const size_t before = ids.size();
    size_t at = 0;
    while (!text.empty()) {  // an empty row is an empty list
      const size_t next = text.find(delimiter, at);
      const std::string_view piece = text.substr(at, next == std::string_view::npos ? next : next - at);
      ids.push_back(static_cast<Id>(HashBucket(*c.hash, c.seed, static_cast<uint64_t>(c.buckets), piece)));
      if (next == std::string_view::npos) break;
      at = next + delimiter.size();
    }
    lengths.push_back(static_cast<int64_t>(ids.size() - before));
  }
  return Status::Ok();
}

// Packed strings as an in-process caller may have built them: offsets from 0 up to the bytes' end,
// as many strings as the shape holds (PackedEnds), never decreasing (CheckPacked).
bool PackedEnds(const PackedStrings& s) {
  const bool ends = s.offsets.empty()
                        ? s.bytes.empty()
                        : s.offsets.front() == 0 && s.offsets.back() == static_cast<int64_t>(s.bytes.size());
  bool ok = ends && NumElements(s.shape) == s.size();
  for (int64_t d : s.shape) ok = ok && d >= 0;
  return ok;
}

Status PackedMismatch(const std::string& name, const PackedStrings& s) {
  return InvalidArgument("input '" + name + "': its strings' offsets or shape " + ShapeToString(s.shape) +
                         " do not match its bytes");
}

Status CheckPacked(const std::string& name, const PackedStrings& s) {
  bool ok = PackedEnds(s);
  for (size_t i = 1; ok && i < s.offsets.size(); ++i) ok = s.offsets[i] >= s.offsets[i - 1];
  return ok ? Status::Ok() : PackedMismatch(name, s);
}

// Every string of `s` against the config's limits; one pass over the offsets where no string is
// too long and UTF-8 is not required.
Status CheckStrings(const InputConfig& config, const PackedStrings& s) {
  int64_t longest = 0;
  for (int64_t i = 0; i < s.size(); ++i) longest = std::max(longest, s.offsets[i + 1] - s.offsets[i]);
  for (int64_t i = 0; i < s.size() && (longest > config.strings.max_bytes || config.strings.utf8); ++i) {
    RANKD_RETURN_IF_ERROR(CheckString(config, s.at(i), i));
  }
  return Status::Ok();
}

template <typename Id>
Status Convert(const InputConfig& config, const InferInput& in, InferInput& out) {
  const PackedStrings& s = in.strings;
  RANKD_RETURN_IF_ERROR(CheckPacked(config.name, s));
  const std::string& delimiter = config.strings.split;
  if (delimiter.empty()) {  // one id per string, in the strings' shape, hashed in one pass
    RANKD_RETURN_IF_ERROR(CheckStrings(config, s));
    const InputConfig::Strings& c = config.strings;
    if (!c.hash) return InvalidArgument("input '" + config.name + "': BYTES without hash or split in its config");
    out.data = Tensor::Empty(config.dtype, s.shape);
    HashBuckets(*c.hash, c.seed, static_cast<uint64_t>(c.buckets), s.bytes.data(), s.offsets.data(), s.size(),
                out.data.data<Id>());
    out.lengths = in.lengths;
    return Status::Ok();
  }
  // Split: a string per row ([rows] or [rows, 1]), each a list; an empty string an empty list.
  if (!in.lengths.empty() || s.shape.size() > 2 || (s.shape.size() == 2 && s.shape[1] != 1)) {
    return InvalidArgument("input '" + config.name + "' is split on " + Quoted(delimiter) +
                           ": send one string per row, shape [rows] or [rows, 1], without lengths");
  }
  out.lengths.reserve(static_cast<size_t>(s.size()));
  if (config.strings.hash) {                      // each row's pieces found and hashed in one pass
    constexpr size_t kKeptIds = size_t{1} << 20;  // room kept for the next request: 4-8 MB a thread at most
    thread_local std::vector<Id> hashed;          // kept from request to request: no growth once warm
    hashed.clear();
    const Status status = HashSplitPieces(config, s, delimiter, hashed, out.lengths);
    if (status.ok()) {
      out.data = Tensor::Empty(config.dtype, {static_cast<int64_t>(hashed.size())});
      if (!hashed.empty()) std::memcpy(out.data.raw(), hashed.data(), hashed.size() * sizeof(Id));
    }
    if (hashed.capacity() > kKeptIds) std::vector<Id>().swap(hashed);  // a rare large request's room goes
    return status;
  }
  // Ids between a one-byte delimiter that is not a space, a sign or a digit in one pass; ids between
  // another delimiter, and any input with a piece that is not an id, piece by piece below (which
  // names the mistake).
  const char d = delimiter[0];
  if (delimiter.size() == 1 && d != ' ' && d != '-' && static_cast<unsigned char>(d - '0') >= 10) {
    if (ParseSplitIds<Id>(config, s, d, out)) return Status::Ok();
    out.lengths.clear();
  }
  IdWriter<Id> ids(config);
  for (int64_t r = 0; r < s.size(); ++r) {
    std::string_view text = s.at(r);
    RANKD_RETURN_IF_ERROR(CheckString(config, text, r));
    const size_t before = ids.count();
    while (!text.empty()) {
      size_t at = text.find(delimiter);
      RANKD_RETURN_IF_ERROR(ids.Put(text.substr(0, at), r));
      if (at == std::string_view::npos) break;
      text.remove_prefix(at + delimiter.size());
      if (text.empty()) RANKD_RETURN_IF_ERROR(ids.Put(text, r));  // a trailing delimiter: an empty last piece
    }
    out.lengths.push_back(static_cast<int64_t>(ids.count() - before));
  }
  out.data = ids.Take();
  return Status::Ok();
}

}  // namespace

StatusOr<Tensor> StringRecords(const InputConfig& config, const InferInput& in, bool device_reads, Tensor& bytes) {
  const PackedStrings& s = in.strings;
  if (!in.lengths.empty()) return InvalidArgument("input '" + config.name + "' is not ragged: send it without lengths");
  if (!PackedEnds(s)) return PackedMismatch(config.name, s);  // the order is checked as the records are written
  const int64_t count = s.size(), total = static_cast<int64_t>(s.bytes.size());
  const int64_t* offsets = s.offsets.data();
  Shape shape = s.shape;
  shape.push_back(hash_strings::kRecordWidth);
  Tensor records = Tensor::Empty(DType::kI64, shape);
  int64_t* r = records.data<int64_t>();
  bytes = Tensor::Empty(DType::kU8, {(total + 7) / 8 * 8 + hash_strings::kTailBytes});
  const auto base = reinterpret_cast<uintptr_t>(bytes.raw());
  if (base % 8 == 0 && (!device_reads || bytes.location().kind == MemoryKind::kPinned)) {
    std::memcpy(bytes.raw(), s.bytes.data(), static_cast<size_t>(total));
    std::memset(static_cast<uint8_t*>(bytes.raw()) + total, 0, bytes.bytes() - static_cast<size_t>(total));
    int64_t shortest = 0, longest = 0;  // one pass: the records, and the lengths' bounds
    for (int64_t i = 0; i < count; ++i) {
      const int64_t length = offsets[i + 1] - offsets[i];
      shortest = std::min(shortest, length);
      longest = std::max(longest, length);
      r[2 * i] = static_cast<int64_t>(base) + offsets[i];
      r[2 * i + 1] = length;
    }
    if (shortest < 0) return PackedMismatch(config.name, s);
    if (longest > config.strings.max_bytes || config.strings.utf8) RANKD_RETURN_IF_ERROR(CheckStrings(config, s));
    return records;
  }
  RANKD_RETURN_IF_ERROR(CheckPacked(config.name, s));
  RANKD_RETURN_IF_ERROR(CheckStrings(config, s));
  bytes = Tensor();
  const InputConfig::Strings& c = config.strings;
  HashBuckets(*c.hash, c.seed, static_cast<uint64_t>(c.buckets), s.bytes.data(), offsets, count, r);
  for (int64_t i = count - 1; i >= 0; --i) {  // (bucket, kPrehashed) from the last, as r[i] moves to r[2i]
    r[2 * i] = r[i];
    r[2 * i + 1] = hash_strings::kPrehashed;
  }
  return records;
}

StatusOr<InferInput> StringsToIds(const InputConfig& config, const InferInput& in) {
  InferInput out;
  out.name = in.name;
  Status s = config.dtype == DType::kI32 ? Convert<int32_t>(config, in, out) : Convert<int64_t>(config, in, out);
  if (!s.ok()) return s;
  return out;
}

}  // namespace rankd
