// The hashes that turn string features into ids, as training pipelines compute them, so an id
// served is the id the model was trained on:
//   fingerprint64  FarmHash's Fingerprint64 (TensorFlow's tf.strings.to_hash_bucket_fast, and
//                  feature columns' categorical_column_with_hash_bucket); no seed
//   xxhash64       xxHash's XXH64 with a 64-bit seed (0 by default)
//   murmur3_32     MurmurHash3's x86_32 with a 32-bit seed (0 by default; Spark's hash() and
//                  HashingTF use 42), its 32 bits taken as unsigned
// A string's bucket is the hash modulo the bucket count, the hash taken as unsigned.
// On the host they come from Debian's libfarmhash, libxxhash and libmurmurhash.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace rankd {

enum class StringHash : uint8_t { kFingerprint64, kXxHash64, kMurmur3_32 };

std::optional<StringHash> StringHashFromName(std::string_view name);
const char* StringHashName(StringHash h);
// Whether the function takes a seed, and the largest seed it takes.
uint64_t MaxStringHashSeed(StringHash h);

uint64_t HashString(StringHash h, uint64_t seed, std::string_view s);

inline uint64_t HashBucket(StringHash h, uint64_t seed, uint64_t buckets, std::string_view s) {
  return HashString(h, seed, s) % buckets;
}

// The buckets of `count` packed strings (string i is bytes[offsets[i], offsets[i + 1])), into
// out[0, count): one dispatch on the function for them all. Id is int32_t or int64_t.
template <typename Id>
void HashBuckets(StringHash h, uint64_t seed, uint64_t buckets, const char* bytes, const int64_t* offsets,
                 int64_t count, Id* out);

}  // namespace rankd
