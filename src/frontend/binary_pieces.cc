#include "frontend/binary_pieces.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "common/host_allocator.h"

namespace rankd {
namespace {

constexpr size_t kAlign = 64;

size_t RoundUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

BinaryPieces BinaryPieces::Contiguous(std::string_view bytes) {
  BinaryPieces b;
  if (!bytes.empty()) b.pieces.push_back({const_cast<char*>(bytes.data()), bytes.size()});
  return b;
}

size_t BinaryPieces::size() const {
  size_t n = 0;
  for (const Piece& p : pieces) n += p.bytes;
  return n;
}

std::optional<size_t> JsonPartBytes(std::string_view header, uint64_t body_bytes) {
  uint64_t bytes = 0;
  auto [end, ec] = std::from_chars(header.data(), header.data() + header.size(), bytes);
  if (header.empty() || ec != std::errc() || end != header.data() + header.size() || bytes == 0 || bytes >= body_bytes)
    return std::nullopt;
  return static_cast<size_t>(bytes);
}

std::vector<uint64_t> AnnouncedBinarySizes(std::string_view json, size_t limit) {
  constexpr std::string_view kKey = "binary_data_size";
  std::vector<uint64_t> sizes;
  sizes.reserve(64);  // W1's 53 inputs: one allocation, not seven as the list grows
  const size_t n = json.size();
  size_t i = 0;
  while (sizes.size() < limit) {
    i = json.find('"', i);  // the next string (a W1 header has a few KB of them; found a word at a time)
    if (i == std::string_view::npos) break;
    const size_t begin = ++i;
    for (;; ++i) {  // the string's end: a quote after an even run of backslashes
      i = json.find('"', i);
      if (i == std::string_view::npos) break;
      size_t slashes = 0;
      while (i - slashes > begin && json[i - slashes - 1] == '\\') ++slashes;
      if (slashes % 2 == 0) break;
    }
    if (i == std::string_view::npos) break;
    const std::string_view text = json.substr(begin, i - begin);
    ++i;
    if (text != kKey) continue;
    size_t j = i;
    while (j < n && IsSpace(json[j])) ++j;
    if (j >= n || json[j] != ':') continue;
    ++j;
    while (j < n && IsSpace(json[j])) ++j;
    uint64_t size = 0;
    auto [end, ec] = std::from_chars(json.data() + j, json.data() + n, size);
    if (ec == std::errc()) sizes.push_back(size);
    i = static_cast<size_t>(end - json.data());
  }
  return sizes;
}

BinaryPieces LayOutBinary(const std::vector<uint64_t>& announced, size_t bytes) {
  std::vector<size_t> sizes;
  sizes.reserve(announced.size() + 1);
  size_t left = bytes;
  for (uint64_t s : announced) {
    if (s > left) break;
    if (s == 0) continue;  // takes no bytes
    sizes.push_back(static_cast<size_t>(s));
    left -= static_cast<size_t>(s);
  }
  if (left) sizes.push_back(left);
  size_t total = kAlign;  // the last piece's 64 bytes after it
  for (size_t s : sizes) total += RoundUp(s);
  BinaryPieces b;
  {
    RequestTensorScope request_tensors;
    b.storage = Tensor::Empty(DType::kU8, {static_cast<int64_t>(total)});
  }
  char* at = static_cast<char*>(b.storage.raw());
  b.pieces.reserve(sizes.size());
  for (size_t s : sizes) {
    b.pieces.push_back({at, s});
    at += RoundUp(s);
  }
  return b;
}

BinaryPieces PlaceBinary(std::string_view json, std::string_view binary) {
  BinaryPieces b = LayOutBinary(AnnouncedBinarySizes(json), binary.size());
  for (const BinaryPieces::Piece& p : b.pieces) {
    std::memcpy(p.data, binary.data(), p.bytes);
    binary.remove_prefix(p.bytes);
  }
  return b;
}

BinaryReader::BinaryReader(const BinaryPieces& binary) : binary_(binary), left_(binary.size()) {}

BinaryReader::Span BinaryReader::Take(size_t bytes) {
  const auto& pieces = binary_.pieces;
  while (piece_ < pieces.size() && offset_ == pieces[piece_].bytes) {
    ++piece_;
    offset_ = 0;
  }
  Span span;
  span.bytes = bytes;
  span.piece = piece_;
  span.offset = offset_;
  if (bytes == 0) return span;
  if (pieces[piece_].bytes - offset_ >= bytes) span.contiguous = pieces[piece_].data + offset_;
  size_t rest = bytes;
  while (rest) {
    if (offset_ == pieces[piece_].bytes) {
      ++piece_;
      offset_ = 0;
    }
    const size_t take = std::min(rest, pieces[piece_].bytes - offset_);
    offset_ += take;
    rest -= take;
  }
  left_ -= bytes;
  return span;
}

void BinaryReader::CopyTo(const Span& span, void* to) const {
  auto* out = static_cast<char*>(to);
  size_t piece = span.piece, offset = span.offset, rest = span.bytes;
  while (rest) {
    const BinaryPieces::Piece& p = binary_.pieces[piece];
    const size_t take = std::min(rest, p.bytes - offset);
    if (take) std::memcpy(out, p.data + offset, take);
    out += take;
    rest -= take;
    ++piece;
    offset = 0;
  }
}

Tensor BinaryReader::View(const Span& span, DType dtype, Shape shape) const {
  if (!binary_.storage.defined() || !span.contiguous || reinterpret_cast<uintptr_t>(span.contiguous) % kAlign != 0)
    return Tensor();
  return Tensor::View(dtype, std::move(shape), const_cast<char*>(span.contiguous), binary_.storage.location(),
                      binary_.storage.keeper());
}

}  // namespace rankd
