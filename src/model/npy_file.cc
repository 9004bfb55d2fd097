#include "model/npy_file.h"

#include <cctype>
#include <cstring>

namespace rankd {
namespace {

// The value of `key` in the header's dict literal (from its first non-space character), or "".
std::string ValueOf(const std::string& header, const std::string& key) {
  for (const char quote : {'\'', '"'}) {
    const std::string k = std::string(1, quote) + key + std::string(1, quote);
    size_t at = header.find(k);
    if (at == std::string::npos) continue;
    at = header.find(':', at + k.size());
    if (at == std::string::npos) return "";
    ++at;
    while (at < header.size() && std::isspace(static_cast<unsigned char>(header[at]))) ++at;
    return header.substr(at);
  }
  return "";
}

// A Python string literal at the start of `s` ('<f4' or "<f4"), or "".
std::string StringLiteral(const std::string& s) {
  if (s.empty() || (s[0] != '\'' && s[0] != '"')) return "";
  const size_t end = s.find(s[0], 1);
  return end == std::string::npos ? "" : s.substr(1, end - 1);
}

// A Python tuple of non-negative integers at the start of `s`: (), (4,), (4, 3).
bool ShapeTuple(const std::string& s, std::vector<int64_t>& shape) {
  if (s.empty() || s[0] != '(') return false;
  const size_t end = s.find(')');
  if (end == std::string::npos) return false;
  std::string inner = s.substr(1, end - 1);
  size_t at = 0;
  while (at < inner.size()) {
    while (at < inner.size() && (std::isspace(static_cast<unsigned char>(inner[at])) || inner[at] == ',')) ++at;
    if (at >= inner.size()) break;
    if (!std::isdigit(static_cast<unsigned char>(inner[at]))) return false;
    int64_t v = 0;
    for (; at < inner.size() && std::isdigit(static_cast<unsigned char>(inner[at])); ++at) {
      if (v > (INT64_MAX - 9) / 10) return false;
      v = v * 10 + (inner[at] - '0');
    }
    shape.push_back(v);
  }
  return true;
}

}  // namespace

StatusOr<NpyArray> ParseNpy(const std::string& bytes, const std::string& what) {
  static const char kMagic[] = "\x93NUMPY";
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0) {
    return InvalidArgument(what + " is not a NumPy .npy file (no \\x93NUMPY magic)");
  }
  const auto major = static_cast<uint8_t>(bytes[6]);
  if (major < 1 || major > 3) return InvalidArgument(what + ": .npy format version " + std::to_string(major));
  size_t header_len = 0, at = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8;
    at = 10;
  } else {
    if (bytes.size() < 12) return InvalidArgument(what + ": a .npy header cut short");
    for (int k = 3; k >= 0; --k) header_len = header_len << 8 | static_cast<uint8_t>(bytes[8 + static_cast<size_t>(k)]);
    at = 12;
  }
  if (header_len > bytes.size() - at) return InvalidArgument(what + ": a .npy header longer than the file");
  const std::string header = bytes.substr(at, header_len);
  NpyArray a;
  a.descr = StringLiteral(ValueOf(header, "descr"));
  if (a.descr.empty()) return InvalidArgument(what + ": the .npy header names no 'descr'");
  const std::string fortran = ValueOf(header, "fortran_order");
  if (fortran.rfind("True", 0) == 0) {
    return InvalidArgument(what + " holds its array in Fortran order: save it in C order (numpy.ascontiguousarray)");
  }
  if (fortran.rfind("False", 0) != 0) return InvalidArgument(what + ": the .npy header has no 'fortran_order'");
  if (!ShapeTuple(ValueOf(header, "shape"), a.shape)) {
    return InvalidArgument(what + ": the .npy header's 'shape' is not a tuple of sizes");
  }
  size_t element = 0;  // the bytes of an element, from the digits after the byte order and kind ('<f4': 4)
  for (size_t k = 2; k < a.descr.size() && k < 6 && std::isdigit(static_cast<unsigned char>(a.descr[k])); ++k) {
    element = element * 10 + static_cast<size_t>(a.descr[k] - '0');
  }
  uint64_t count = 1;
  for (int64_t d : a.shape) {
    if (d != 0 && count > UINT64_MAX / static_cast<uint64_t>(d)) return InvalidArgument(what + ": a shape too large");
    count *= static_cast<uint64_t>(d);
  }
  const size_t data_at = at + header_len;
  if (element == 0 || (count != 0 && element > UINT64_MAX / count) || bytes.size() - data_at != count * element) {
    return InvalidArgument(what + " holds " + std::to_string(bytes.size() - data_at) + " bytes of elements where its " +
                           "header ('" + a.descr + "', " + std::to_string(count) + " elements) says otherwise");
  }
  a.data = std::string_view(bytes).substr(data_at);
  return a;
}

}  // namespace rankd
