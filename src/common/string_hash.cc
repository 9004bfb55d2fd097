#include "common/string_hash.h"

#include <farmhash.h>
#include <murmurhash.h>
#include <xxhash.h>

namespace rankd {

std::optional<StringHash> StringHashFromName(std::string_view name) {
  if (name == "fingerprint64") return StringHash::kFingerprint64;
  if (name == "xxhash64") return StringHash::kXxHash64;
  if (name == "murmur3_32") return StringHash::kMurmur3_32;
  return std::nullopt;
}

const char* StringHashName(StringHash h) {
  switch (h) {
    case StringHash::kFingerprint64:
      return "fingerprint64";
    case StringHash::kXxHash64:
      return "xxhash64";
    case StringHash::kMurmur3_32:
      return "murmur3_32";
  }
  return "?";
}

uint64_t MaxStringHashSeed(StringHash h) {
  switch (h) {
    case StringHash::kFingerprint64:
      return 0;
    case StringHash::kXxHash64:
      return UINT64_MAX;
    case StringHash::kMurmur3_32:
      return UINT32_MAX;
  }
  return 0;
}

uint64_t HashString(StringHash h, uint64_t seed, std::string_view s) {
  switch (h) {
    case StringHash::kFingerprint64:
      return util::Fingerprint64(s.data(), s.size());
    case StringHash::kXxHash64:
      return XXH64(s.data(), s.size(), seed);
    case StringHash::kMurmur3_32: {
      uint32_t out = 0;
      lmmh_x86_32(s.data(), static_cast<unsigned>(s.size()), static_cast<uint32_t>(seed), &out);
      return out;
    }
  }
  return 0;
}

}  // namespace rankd
