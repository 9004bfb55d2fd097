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

namespace {

template <typename Id, typename Hash>
void BucketsOf(Hash&& hash, uint64_t buckets, const char* bytes, const int64_t* offsets, int64_t count, Id* out) {
  for (int64_t i = 0; i < count; ++i) {
    const auto size = static_cast<size_t>(offsets[i + 1] - offsets[i]);
    out[i] = static_cast<Id>(hash(bytes + offsets[i], size) % buckets);
  }
}

}  // namespace

template <typename Id>
void HashBuckets(StringHash h, uint64_t seed, uint64_t buckets, const char* bytes, const int64_t* offsets,
                 int64_t count, Id* out) {
  switch (h) {
    case StringHash::kFingerprint64:
      return BucketsOf([](const char* p, size_t n) { return util::Fingerprint64(p, n); }, buckets, bytes, offsets,
                       count, out);
    case StringHash::kXxHash64:
      return BucketsOf([seed](const char* p, size_t n) { return XXH64(p, n, seed); }, buckets, bytes, offsets, count,
                       out);
    case StringHash::kMurmur3_32:
      return BucketsOf(
          [seed](const char* p, size_t n) {
            uint32_t v = 0;
            lmmh_x86_32(p, static_cast<unsigned>(n), static_cast<uint32_t>(seed), &v);
            return uint64_t{v};
          },
          buckets, bytes, offsets, count, out);
  }
}

template void HashBuckets<int32_t>(StringHash, uint64_t, uint64_t, const char*, const int64_t*, int64_t, int32_t*);
template void HashBuckets<int64_t>(StringHash, uint64_t, uint64_t, const char*, const int64_t*, int64_t, int64_t*);

}  // namespace rankd
