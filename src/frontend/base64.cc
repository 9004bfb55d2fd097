#include "frontend/base64.h"

namespace rankd {
namespace {

int Sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::optional<std::string> DecodeBase64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const int pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=' && text[i + 3] == '=') : 0;
    int v[4];
    for (int k = 0; k < 4 - pad; ++k) {
      v[k] = Sextet(text[i + static_cast<size_t>(k)]);
      if (v[k] < 0) return std::nullopt;
    }
    out.push_back(static_cast<char>((v[0] << 2) | (v[1] >> 4)));
    if (pad < 2) out.push_back(static_cast<char>(((v[1] & 15) << 4) | (v[2] >> 2)));
    if (pad < 1) out.push_back(static_cast<char>(((v[2] & 3) << 6) | v[3]));
  }
  return out;
}

}  // namespace rankd
