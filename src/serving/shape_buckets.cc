#include "serving/shape_buckets.h"

#include <algorithm>
#include <cstring>

#include "common/host_copies.h"

namespace rankd {
namespace {

void SortUnique(std::vector<int64_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// The smallest allowed size >= n, or -1.
int64_t RoundUp(const std::vector<int64_t>& allowed, int64_t n) {
  auto it = std::lower_bound(allowed.begin(), allowed.end(), n);
  return it == allowed.end() ? -1 : *it;
}

}  // namespace

std::string BucketKey::ToString() const {
  std::string s = "rows=" + std::to_string(rows);
  if (lengths.empty()) return users > 0 ? s + " users=" + std::to_string(users) : s;
  s += " lengths=[";
  for (size_t k = 0; k < lengths.size(); ++k) s += (k ? "," : "") + std::to_string(lengths[k]);
  s += "]";
  if (users > 0) s += " users=" + std::to_string(users);
  return s;
}

std::vector<int64_t> BucketKey::Numbers() const {
  std::vector<int64_t> n{rows, users};
  n.insert(n.end(), lengths.begin(), lengths.end());
  return n;
}

std::vector<int64_t> ShapeBuckets::Geometric(int64_t limit) {
  std::vector<int64_t> sizes;
  for (int64_t base = 1; base < limit; base *= 2) {
    for (int64_t eighth = 0; eighth < 8; ++eighth) {
      int64_t n = base + base * eighth / 8;
      if (n < limit) sizes.push_back(n);
    }
  }
  sizes.push_back(std::max<int64_t>(limit, 1));
  SortUnique(sizes);
  return sizes;
}

std::vector<int64_t> ShapeBuckets::AllowedLengths(std::vector<int64_t> configured, int64_t max_length) {
  std::vector<int64_t> allowed = configured.empty() ? Geometric(max_length) : std::move(configured);
  allowed.erase(std::remove_if(allowed.begin(), allowed.end(), [&](int64_t n) { return n > max_length; }),
                allowed.end());
  allowed.push_back(max_length);
  SortUnique(allowed);
  return allowed;
}

ShapeBuckets::ShapeBuckets(std::vector<int64_t> rows, std::vector<std::vector<int64_t>> lengths,
                           std::vector<int64_t> users, std::vector<bool> own_length_if_idless)
    : rows_(std::move(rows)),
      lengths_(std::move(lengths)),
      users_(std::move(users)),
      own_length_if_idless_(std::move(own_length_if_idless)) {
  SortUnique(rows_);
  SortUnique(users_);
  for (auto& l : lengths_) SortUnique(l);
  own_length_if_idless_.resize(lengths_.size(), false);
}

std::optional<BucketKey> ShapeBuckets::Find(int64_t rows, const std::vector<int64_t>& ragged_max_lengths, int64_t users,
                                            const std::vector<bool>* idless_rows) const {
  BucketKey key;
  key.rows = RoundUp(rows_, rows);
  if (key.rows < 0) return std::nullopt;
  if (!users_.empty()) {
    key.users = RoundUp(users_, std::max<int64_t>(users, 1));
    if (key.users < 0) return std::nullopt;
  }
  for (size_t k = 0; k < lengths_.size(); ++k) {
    const bool idless = idless_rows && k < idless_rows->size() && (*idless_rows)[k];
    if (lengths_[k].empty() || (idless && own_length_if_idless_[k])) {  // the request's own longest row
      key.lengths.push_back(ragged_max_lengths[k]);
      continue;
    }
    int64_t length = RoundUp(lengths_[k], std::max<int64_t>(ragged_max_lengths[k], 1));
    if (length < 0) return std::nullopt;  // longer than max_length: the request is refused before this
    key.lengths.push_back(length);
  }
  return key;
}

namespace {

bool PowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// The powers of two among `sizes`, and the largest.
std::vector<int64_t> Octaves(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> out;
  for (int64_t n : sizes) {
    if (PowerOfTwo(n) || n == sizes.back()) out.push_back(n);
  }
  return out;
}

}  // namespace

std::vector<BucketKey> ShapeBuckets::WarmupKeys(int64_t max_rows, const std::vector<int64_t>& max_lengths) const {
  std::vector<std::vector<int64_t>> levels_of;
  size_t levels = 1;
  for (const auto& l : lengths_) {
    levels_of.push_back(Octaves(l));
    levels = std::max(levels, levels_of.back().size());
  }
  std::vector<BucketKey> keys;
  for (int64_t rows : Octaves(rows_)) {
    if (rows > max_rows) break;
    for (size_t j = 0; j < levels; ++j) {
      BucketKey key{rows, {}, users_.empty() ? 0 : users_.front()};
      int64_t longest = 1;
      for (const auto& l : levels_of) {
        if (!l.empty()) longest = std::max(longest, l[std::min(j, l.size() - 1)]);
      }
      for (size_t k = 0; k < levels_of.size(); ++k) {
        const auto& l = levels_of[k];
        key.lengths.push_back(l.empty() ? std::min(longest, max_lengths[k]) : l[std::min(j, l.size() - 1)]);
      }
      keys.push_back(std::move(key));
    }
  }
  return keys;
}

namespace {

// Each of the `count` ragged inputs' `part` (values or offsets) among p's graph inputs, by ragged
// index.
std::vector<const Tensor*> RaggedParts(const PreparedRequest& p, const std::vector<GraphInputKind>& kinds,
                                       GraphInputKind::Part part, size_t count) {
  std::vector<const Tensor*> parts(count, nullptr);
  for (size_t i = 0; i < kinds.size(); ++i) {
    const int k = kinds[i].ragged;
    if (kinds[i].part == part && k >= 0 && static_cast<size_t>(k) < count) parts[static_cast<size_t>(k)] = &p.inputs[i];
  }
  return parts;
}

// Whether PadToBucket takes p's graph input i as it is, whole: rows already the bucket's (users
// for user inputs), and a ragged input's offsets from 0 with its ids filling their slots or, with
// `ids_unpadded`, ending where the offsets do.
bool TakenWhole(const PreparedRequest& p, size_t i, const BucketKey& key, const GraphInputKind& kind,
                const std::vector<const Tensor*>& offsets, bool ids_unpadded) {
  const int64_t have = kind.user ? p.users : p.rows, want = kind.user ? key.users : key.rows;
  if (kind.part == GraphInputKind::kDense || kind.part == GraphInputKind::kRequestIndex) return want == have;
  const int64_t* o = offsets[static_cast<size_t>(kind.ragged)]->data<int64_t>();
  if (o[0] != 0) return false;
  if (kind.part == GraphInputKind::kOffsets) return want == have;
  const int64_t ids = p.inputs[i].dim(0), width = key.lengths[static_cast<size_t>(kind.ragged)];
  return (want == have && ids == want * width) || (ids_unpadded && ids == o[have]);
}

}  // namespace

PreparedRequest PadToBucket(const PreparedRequest& p, const BucketKey& key, const std::vector<GraphInputKind>& kinds,
                            bool ids_unpadded) {
  PreparedRequest out;
  out.rows = key.rows;
  out.users = key.users;
  out.ragged_max_lengths = key.lengths;
  out.inputs.resize(p.inputs.size());
  // Offsets of each ragged input in the request (to lay out its values).
  const std::vector<const Tensor*> offsets = RaggedParts(p, kinds, GraphInputKind::kOffsets, key.lengths.size());
  for (size_t i = 0; i < kinds.size(); ++i) {
    const Tensor& in = p.inputs[i];
    const GraphInputKind& kind = kinds[i];
    // Rows the input has and must have: users for user inputs, candidates for the rest.
    int64_t have = kind.user ? p.users : p.rows;
    int64_t want = kind.user ? key.users : key.rows;
    const bool whole = TakenWhole(p, i, key, kind, offsets, ids_unpadded);  // viewed, not copied
    if (kind.part == GraphInputKind::kDense || kind.part == GraphInputKind::kRequestIndex) {
      if (whole) {  // already the bucket's rows
        out.inputs[i] = in.ViewBytes(in.dtype(), in.shape());
        continue;
      }
      Shape s = in.shape();
      s[0] = want;
      Tensor t = Tensor::Empty(in.dtype(), s);  // the request's rows, then zero rows
      if (in.bytes() > 0) std::memcpy(t.raw(), in.raw(), in.bytes());
      CountHostCopy(HostCopy::kPad, in.bytes());
      std::memset(static_cast<uint8_t*>(t.raw()) + in.bytes(), 0, t.bytes() - in.bytes());
      out.inputs[i] = std::move(t);
      continue;
    }
    // Ragged: the request's ids stay packed, row after row, and -1 fills the values to `want *
    // width` slots; the padded rows are empty bags at the end. Every reader of a ragged input goes
    // by its offsets, so this scores as any other layout of the same rows, and it costs two block
    // copies instead of one per row.
    const int64_t width = key.lengths[static_cast<size_t>(kind.ragged)];
    const int64_t* o = offsets[static_cast<size_t>(kind.ragged)]->data<int64_t>();
    const int64_t first = o[0], used = o[have] - o[0];
    if (kind.part == GraphInputKind::kOffsets) {
      if (whole) {
        out.inputs[i] = in.ViewBytes(in.dtype(), in.shape());
        continue;
      }
      Tensor t = Tensor::Empty(DType::kI64, {want + 1});
      int64_t* to = t.data<int64_t>();
      for (int64_t r = 0; r <= have; ++r) to[r] = o[r] - first;
      std::fill(to + have + 1, to + want + 1, used);
      out.inputs[i] = std::move(t);
      continue;
    }
    out.sequence_elements += want * width;
    const size_t item = DTypeSize(in.dtype());
    if (whole) {  // full (multi-hot rows at their length), or unpadded ids from the first slot
      out.inputs[i] = in.ViewBytes(in.dtype(), in.shape());
      continue;
    }
    if (ids_unpadded) {
      out.inputs[i] = in.ViewBytes(in.dtype(), {used}, static_cast<size_t>(first) * item);
      continue;
    }
    Tensor t = Tensor::Empty(in.dtype(), {want * width});
    auto* to = static_cast<uint8_t*>(t.raw());
    std::memcpy(to, static_cast<const uint8_t*>(in.raw()) + static_cast<size_t>(first) * item,
                static_cast<size_t>(used) * item);
    CountHostCopy(HostCopy::kPad, static_cast<size_t>(used) * item);
    std::memset(to + static_cast<size_t>(used) * item, 0xff, t.bytes() - static_cast<size_t>(used) * item);
    out.inputs[i] = std::move(t);
  }
  return out;
}

bool FitsBucket(const PreparedRequest& p, const BucketKey& key, const std::vector<GraphInputKind>& kinds,
                bool ids_unpadded) {
  if (p.inputs.size() != kinds.size()) return false;
  const std::vector<const Tensor*> offsets = RaggedParts(p, kinds, GraphInputKind::kOffsets, key.lengths.size());
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (!TakenWhole(p, i, key, kinds[i], offsets, ids_unpadded)) return false;
  }
  return true;
}

std::vector<bool> RowsWithoutIds(const PreparedRequest& p, const std::vector<GraphInputKind>& kinds,
                                 const std::vector<bool>& which) {
  std::vector<bool> idless(which.size(), false);
  const std::vector<const Tensor*> values = RaggedParts(p, kinds, GraphInputKind::kValues, which.size());
  const std::vector<const Tensor*> offsets = RaggedParts(p, kinds, GraphInputKind::kOffsets, which.size());
  auto scan = [](const auto* ids, const int64_t* o, int64_t rows) {
    for (int64_t r = 0; r < rows; ++r) {
      bool any = false;
      for (int64_t j = o[r]; j < o[r + 1] && !any; ++j) any = ids[j] >= 0;
      if (!any) return true;
    }
    return false;
  };
  for (size_t k = 0; k < which.size(); ++k) {
    if (!which[k] || !values[k] || !offsets[k]) continue;
    const int64_t rows = offsets[k]->dim(0) - 1;
    const int64_t* o = offsets[k]->data<int64_t>();
    idless[k] = values[k]->dtype() == DType::kI32 ? scan(values[k]->data<int32_t>(), o, rows)
                                                  : scan(values[k]->data<int64_t>(), o, rows);
  }
  return idless;
}

std::vector<bool> RowsWithoutIds(const std::vector<const PreparedRequest*>& parts,
                                 const std::vector<GraphInputKind>& kinds, const std::vector<bool>& which) {
  std::vector<bool> idless(which.size(), false), wanted = which;
  for (const PreparedRequest* p : parts) {
    if (std::none_of(wanted.begin(), wanted.end(), [](bool w) { return w; })) break;  // all found, or none asked
    const std::vector<bool> own = RowsWithoutIds(*p, kinds, wanted);
    for (size_t k = 0; k < own.size(); ++k) {
      if (!own[k]) continue;
      idless[k] = true;
      wanted[k] = false;  // found: the other parts need not be scanned for it
    }
  }
  return idless;
}

std::vector<Tensor> TakeRows(std::vector<Tensor> outputs, int64_t rows) {
  for (Tensor& t : outputs) {
    if (t.rank() > 0 && t.dim(0) > rows) t = t.Rows(0, rows);
  }
  return outputs;
}

}  // namespace rankd
