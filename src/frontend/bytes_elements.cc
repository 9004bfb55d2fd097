#include "frontend/bytes_elements.h"

#include <cstdint>

namespace rankd {

StatusOr<PackedStrings> DecodeBytesElements(std::string_view raw, int64_t count, const std::string& input) {
  PackedStrings s;
  if (count < 0 || static_cast<uint64_t>(count) > raw.size() / 4) {
    return InvalidArgument("input '" + input + "': " + std::to_string(raw.size()) + " bytes cannot hold " +
                           std::to_string(count) + " BYTES elements (each has a 4-byte length)");
  }
  if (count > 0) s.Reserve(static_cast<size_t>(count), raw.size() - static_cast<size_t>(count) * 4);
  size_t at = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (raw.size() - at < 4) {
      return InvalidArgument("input '" + input + "': the data ends before BYTES element " + std::to_string(i));
    }
    const auto* p = reinterpret_cast<const unsigned char*>(raw.data() + at);
    const uint32_t length = p[0] | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
    at += 4;
    if (length > raw.size() - at) {
      return InvalidArgument("input '" + input + "': BYTES element " + std::to_string(i) + " says " +
                             std::to_string(length) + " bytes but " + std::to_string(raw.size() - at) + " are left");
    }
    s.Append(raw.substr(at, length));
    at += length;
  }
  if (at != raw.size()) {
    return InvalidArgument("input '" + input + "': " + std::to_string(raw.size() - at) + " bytes are left after its " +
                           std::to_string(count) + " BYTES elements");
  }
  return s;
}

std::string EncodeBytesElements(const PackedStrings& strings) {
  std::string out;
  out.reserve(strings.bytes.size() + 4 * static_cast<size_t>(strings.size()));
  for (int64_t i = 0; i < strings.size(); ++i) {
    const std::string_view s = strings.at(i);
    const auto n = static_cast<uint32_t>(s.size());
    for (int b = 0; b < 4; ++b) out += static_cast<char>((n >> (8 * b)) & 0xff);
    out.append(s);
  }
  return out;
}

}  // namespace rankd
