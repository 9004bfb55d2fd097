#include "embedding/hotness_snapshot.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <unordered_map>

#include "common/mutex.h"

namespace rankd {
namespace {

constexpr char kMagic1[8] = {'R', 'K', 'D', 'H', 'O', 'T', '1', '\n'};
constexpr char kMagic2[8] = {'R', 'K', 'D', 'H', 'O', 'T', '2', '\n'};
constexpr size_t kRecord = 9;                       // uint64 key + one byte of count
constexpr uint64_t kMaxTables = uint64_t{1} << 16;  // RowKey's table index
constexpr uint32_t kMaxName = uint32_t{1} << 16;

void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLE(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

// Reads the file a piece at a time, knowing how many bytes are left.
class SnapshotReader {
 public:
  SnapshotReader(std::ifstream& f, uint64_t size, const std::string& path) : f_(f), left_(size), path_(path) {}
  Status Read(char* to, uint64_t bytes, const std::string& what) {
    if (bytes > left_ || !f_.read(to, static_cast<std::streamsize>(bytes))) {
      return InvalidArgument("the hotness snapshot '" + path_ + "' is cut short in " + what);
    }
    left_ -= bytes;
    return Status::Ok();
  }
  StatusOr<uint64_t> ReadU64(const std::string& what) {
    char b[8];
    RANKD_RETURN_IF_ERROR(Read(b, 8, what));
    return GetLE(b, 8);
  }
  uint64_t left() const { return left_; }

 private:
  std::ifstream& f_;
  uint64_t left_;
  const std::string& path_;
};

}  // namespace

Status SaveHotness(const std::string& path, std::span<const std::string> tables, const HotKeys& hottest) {
  if (tables.size() > kMaxTables) return InvalidArgument("a hotness snapshot names at most 65,536 tables");
  // One save at a time in the process: two versions of a model may name the same file.
  static Mutex saving;
  MutexLock lock(saving);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    std::string out(kMagic2, sizeof kMagic2);
    PutU64(out, tables.size());
    for (const std::string& name : tables) {
      const auto n = static_cast<uint32_t>(std::min<size_t>(name.size(), kMaxName));
      for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
      out.append(name, 0, n);
    }
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

StatusOr<HotnessSnapshot> LoadHotness(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return NotFound("no hotness snapshot at '" + path + "'");
  const auto size = static_cast<uint64_t>(f.tellg());
  f.seekg(0);
  SnapshotReader in(f, size, path);
  char magic[8];
  if (!in.Read(magic, sizeof magic, "its header").ok() ||
      (std::memcmp(magic, kMagic1, sizeof magic) != 0 && std::memcmp(magic, kMagic2, sizeof magic) != 0)) {
    return InvalidArgument("'" + path + "' is not a hotness snapshot");
  }
  HotnessSnapshot snapshot;
  if (std::memcmp(magic, kMagic2, sizeof magic) == 0) {
    RANKD_ASSIGN_OR_RETURN(const uint64_t tables, in.ReadU64("its table count"));
    if (tables > kMaxTables || tables > in.left() / 4) {
      return InvalidArgument("the hotness snapshot '" + path + "' says " + std::to_string(tables) + " tables");
    }
    snapshot.tables.resize(tables);
    for (std::string& name : snapshot.tables) {
      char b[4];
      RANKD_RETURN_IF_ERROR(in.Read(b, 4, "its table names"));
      const auto n = static_cast<uint32_t>(GetLE(b, 4));
      if (n > kMaxName) return InvalidArgument("the hotness snapshot '" + path + "' has a table name too long");
      name.resize(n);
      RANKD_RETURN_IF_ERROR(in.Read(name.data(), n, "its table names"));
    }
  }
  RANKD_ASSIGN_OR_RETURN(const uint64_t n, in.ReadU64("its key count"));
  if (n > in.left() / kRecord || in.left() != n * kRecord) {
    return InvalidArgument("the hotness snapshot '" + path + "' says " + std::to_string(n) + " keys and holds " +
                           std::to_string(size) + " bytes");
  }
  // Read a block at a time: the file is not held beside its keys.
  snapshot.keys.reserve(n);
  std::string block;
  for (uint64_t at = 0; at < n;) {
    const uint64_t records = std::min<uint64_t>(n - at, 1 << 16);
    block.resize(records * kRecord);
    RANKD_RETURN_IF_ERROR(in.Read(block.data(), block.size(), "key " + std::to_string(at)));
    for (uint64_t i = 0; i < records; ++i) {
      const char* p = block.data() + i * kRecord;
      snapshot.keys.emplace_back(GetLE(p, 8), static_cast<uint8_t>(p[8]));
    }
    at += records;
  }
  return snapshot;
}

HotKeys RekeyHotness(HotnessSnapshot snapshot, std::span<const std::string> tables) {
  if (snapshot.tables.empty()) return std::move(snapshot.keys);
  std::unordered_map<std::string_view, uint64_t> place;
  for (size_t t = 0; t < tables.size(); ++t) place.emplace(tables[t], t);
  std::vector<int64_t> to(snapshot.tables.size(), -1);  // the saved index's place now
  for (size_t t = 0; t < snapshot.tables.size(); ++t) {
    auto it = place.find(snapshot.tables[t]);
    if (it != place.end()) to[t] = static_cast<int64_t>(it->second);
  }
  constexpr uint64_t kRowBits = (uint64_t{1} << 48) - 1;
  HotKeys& keys = snapshot.keys;
  size_t kept = 0;
  for (const auto& [key, count] : keys) {
    const uint64_t saved = key >> 48;
    if (saved >= to.size() || to[saved] < 0) continue;
    keys[kept++] = {(static_cast<uint64_t>(to[saved]) << 48) | (key & kRowBits), count};
  }
  keys.resize(kept);
  return std::move(keys);
}

}  // namespace rankd
