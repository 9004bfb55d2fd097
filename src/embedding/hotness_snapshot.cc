#include "embedding/hotness_snapshot.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/mutex.h"

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
  // One save at a time in the process: two versions of a model may name the same file.
  static Mutex saving;
  MutexLock lock(saving);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    std::string out(kMagic, sizeof kMagic);
    PutU64(out, hottest.size());
    // Written a block at a time: a snapshot of tens of millions of rows is not held twice.
    constexpr size_t kBlock = size_t{1} << 20;
    for (const auto& [key, count] : hottest) {
      PutU64(out, key);
      out.push_back(static_cast<char>(std::clamp(count, 0, 255)));
      if (out.size() >= kBlock) {
        f.write(out.data(), static_cast<std::streamsize>(out.size()));
        out.clear();
      }
    }
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
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return NotFound("no hotness snapshot at '" + path + "'");
  const auto size = static_cast<uint64_t>(f.tellg());
  f.seekg(0);
  char header[16];
  if (size < sizeof header || !f.read(header, sizeof header) || std::memcmp(header, kMagic, sizeof kMagic) != 0) {
    return InvalidArgument("'" + path + "' is not a hotness snapshot");
  }
  const uint64_t n = GetU64(header + 8);
  if (n > (size - 16) / kRecord || size != 16 + n * kRecord) {
    return InvalidArgument("the hotness snapshot '" + path + "' says " + std::to_string(n) + " keys and holds " +
                           std::to_string(size) + " bytes");
  }
  // Read a block at a time: the file is not held beside its keys.
  HotKeys hottest;
  hottest.reserve(n);
  std::string block;
  for (uint64_t at = 0; at < n;) {
    const uint64_t records = std::min<uint64_t>(n - at, 1 << 16);
    block.resize(records * kRecord);
    if (!f.read(block.data(), static_cast<std::streamsize>(block.size()))) {
      return InvalidArgument("the hotness snapshot '" + path + "' could not be read past key " + std::to_string(at));
    }
    for (uint64_t i = 0; i < records; ++i) {
      const char* p = block.data() + i * kRecord;
      hottest.emplace_back(GetU64(p), static_cast<uint8_t>(p[8]));
    }
    at += records;
  }
  return hottest;
}

}  // namespace rankd
