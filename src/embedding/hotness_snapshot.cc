#include "embedding/hotness_snapshot.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace rankd {
namespace {

constexpr char kMagic[8] = {'R', 'K', 'D', 'H', 'O', 'T', '1', '\n'};
constexpr size_t kRecord = 9;  // uint64 key + one byte of count

void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

}  // namespace

Status SaveHotness(const std::string& path, const HotKeys& hottest) {
  std::string out(kMagic, sizeof kMagic);
  PutU64(out, hottest.size());
  for (const auto& [key, count] : hottest) {
    PutU64(out, key);
    out.push_back(static_cast<char>(std::clamp(count, 0, 255)));
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f.write(out.data(), static_cast<std::streamsize>(out.size())) || !f.flush()) {
      return Internal("cannot write the hotness snapshot '" + tmp + "'");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Internal("cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
  return Status::Ok();
}

StatusOr<HotKeys> LoadHotness(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("no hotness snapshot at '" + path + "'");
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < 16 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return InvalidArgument("'" + path + "' is not a hotness snapshot");
  }
  const uint64_t n = GetU64(bytes.data() + 8);
  if (n > (bytes.size() - 16) / kRecord || bytes.size() != 16 + n * kRecord) {
    return InvalidArgument("the hotness snapshot '" + path + "' says " + std::to_string(n) + " keys and holds " +
                           std::to_string(bytes.size()) + " bytes");
  }
  HotKeys hottest;
  hottest.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    const char* p = bytes.data() + 16 + i * kRecord;
    hottest.emplace_back(GetU64(p), static_cast<uint8_t>(p[8]));
  }
  return hottest;
}

}  // namespace rankd
